"""The A2A bridge with the real a2a-sdk on both sides and a served askhuman.

A scripted agent (``a2a_agent.py``: the SDK's own request handler, task store and
JSON-RPC routes under uvicorn on loopback) puts its task in ``input-required``; the
bridge, on the SDK's own client, raises the card; a click in the fake Slack resumes
the task, and the agent's record shows what it was really told."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.helpers import get_data_parts, get_message_text, new_data_part, new_text_part
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a_agent import ScriptedAgent, served
from askhuman_client import AsyncClient, HumanRequest, ValidationFailed
from askhuman_client.a2a import A2ABridge, question_args
from served import Served

DEPLOY = {"question": "Deploy v1.2.3 to production?",
          "actions": [{"id": "approve", "label": "Approve", "style": "primary"},
                      {"id": "reject", "label": "Reject", "style": "destructive"}]}
PICK_ENV = {"question": "Where should v1.2.3 go?",
            "fields": [{"type": "select", "name": "env", "label": "Environment",
                        "options": [{"value": "staging", "label": "Staging"},
                                    {"value": "production", "label": "Production"}]}],
            "actions": [{"id": "deploy", "label": "Deploy", "style": "primary"}]}


def ask_with(args: dict[str, Any]) -> list[Part]:
    """A status message as an agent that knows askhuman writes it: words for any
    client, and the ask_human args for a card with fields and buttons."""
    return [new_text_part(args["question"]), new_data_part(args)]


@pytest.fixture(scope="module")
def agent() -> Iterator[tuple[ScriptedAgent, str]]:
    scripted = ScriptedAgent()
    with served(scripted) as url:
        yield scripted, url


async def _a2a_client(url: str, http: httpx.AsyncClient, streaming: bool) -> Client:
    factory = ClientFactory(ClientConfig(streaming=streaming, httpx_client=http))
    return await factory.create_from_url(url)


@pytest.fixture
async def ask(askhuman: Served) -> AsyncIterator[AsyncClient]:
    client = askhuman.async_client()
    yield client
    await client.aclose()


@pytest.fixture
async def a2a(agent: tuple[ScriptedAgent, str]) -> AsyncIterator[Client]:
    async with httpx.AsyncClient() as http:
        client = await _a2a_client(agent[1], http, streaming=True)
        yield client
        await client.close()


async def asking(ask: AsyncClient) -> HumanRequest:
    """The newest open request a bridge raised (other suites share this client)."""
    page = await ask.list(status="open")
    return next(r for r in page.items if r.context and "a2a" in r.context)


async def paused_task(ask: AsyncClient, a2a: Client) -> Task:
    """The task behind the newest open bridge request, as the agent has it now: the
    request's context names it."""
    ids = (await asking(ask)).context["a2a"]  # type: ignore[index]
    task: Task = await a2a.get_task(GetTaskRequest(id=ids["task_id"]))
    assert task.context_id == ids["context_id"]
    return task


def told(agent: ScriptedAgent, task: Task) -> list[tuple[str, dict[str, Any] | None]]:
    """What the agent received on ``task``: each message's text and its data part (if
    any), after checking it came on that task and in its context."""
    messages: list[Message] = agent.seen[task.id]
    assert all(m.task_id == task.id and m.context_id == task.context_id for m in messages)
    return [(get_message_text(m), next(iter(get_data_parts(m.parts)), None))
            for m in messages]


# ------------------------------------------------------------------ answers


@pytest.mark.parametrize(("streaming", "polling"), [(True, False), (False, False), (False, True)],
                         ids=["streaming", "blocking", "polling"])
async def test_approve_resumes_the_task(askhuman: Served, ask: AsyncClient,
                                        agent: tuple[ScriptedAgent, str],
                                        streaming: bool, polling: bool) -> None:
    scripted, url = agent
    prompt = f"deploy v1.2.3 ({streaming=}, {polling=})"
    scripted.scripts[prompt] = [ask_with(DEPLOY)]
    scripted.working[prompt] = 0.5   # a polling client sees the task working first
    async with httpx.AsyncClient() as http:
        factory = ClientFactory(ClientConfig(streaming=streaming, polling=polling,
                                             httpx_client=http))
        a2a = await factory.create_from_url(url)
        bridge = A2ABridge(agent=a2a, askhuman=ask, route="agents", agent_name="deployer")
        running = asyncio.create_task(bridge.send(prompt))
        card = await askhuman.next_card(channel="C0AGENTS", timeout=15)
        assert "Deploy v1.2.3 to production?" in card.text
        assert {"Approve", "Reject"} <= set(card.buttons)
        paused = await paused_task(ask, a2a)
        assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert not running.done()

        await askhuman.click(card, "Approve")
        task = await asyncio.wait_for(running, 15)
        await a2a.close()

    assert isinstance(task, Task) and task.id == paused.id
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    [(text, data)] = told(scripted, task)
    assert data["status"] == "submitted" and data["action"]["id"] == "approve"
    told_by = scripted.seen[task.id][0].metadata["askhuman"]
    assert "alice" in told_by["decided_by"].lower() and told_by["status"] == "submitted"
    assert text == f'{told_by["decided_by"]} chose "Approve".'
    assert get_message_text(task.status.message) == f"done: {text}"


async def test_reject_with_a_reason_reaches_the_agent(
        askhuman: Served, ask: AsyncClient, a2a: Client,
        agent: tuple[ScriptedAgent, str]) -> None:
    scripted = agent[0]
    scripted.scripts["deploy on friday"] = [ask_with(DEPLOY)]
    running = asyncio.create_task(A2ABridge(a2a, ask, "agents").send("deploy on friday"))
    card = await askhuman.next_card(channel="C0AGENTS", timeout=15)
    await askhuman.click(card, "Reject", reason="Not on a Friday afternoon.")
    task = await asyncio.wait_for(running, 15)

    assert isinstance(task, Task) and task.status.state == TaskState.TASK_STATE_COMPLETED
    [(text, data)] = told(scripted, task)
    assert data["action"]["id"] == "reject"
    assert data["values"]["reason"] == "Not on a Friday afternoon."
    assert 'chose "Reject".' in text and "reason: Not on a Friday afternoon." in text
    assert "Approve" not in text


async def test_a_select_value_reaches_the_agent(
        askhuman: Served, ask: AsyncClient, a2a: Client,
        agent: tuple[ScriptedAgent, str]) -> None:
    scripted = agent[0]
    scripted.scripts["deploy somewhere"] = [ask_with(PICK_ENV)]
    running = asyncio.create_task(A2ABridge(a2a, ask, "agents").send("deploy somewhere"))
    card = await askhuman.next_card(channel="C0AGENTS", timeout=15)
    assert "Deploy" in card.buttons
    await askhuman.click(card, "Deploy", values={"env": "Production"})
    task = await asyncio.wait_for(running, 15)

    [(text, data)] = told(scripted, task)
    assert data["action"]["id"] == "deploy" and data["values"]["env"] == "production"
    assert "env: production" in text


async def test_two_questions_in_a_row_on_one_task(
        askhuman: Served, ask: AsyncClient, a2a: Client,
        agent: tuple[ScriptedAgent, str]) -> None:
    """A structured question, then a text-only one: the bridge gives the second an
    Answer field, and the typed answer is what the agent reads."""
    scripted = agent[0]
    scripted.scripts["deploy, then name it"] = [
        ask_with(PICK_ENV), [new_text_part("What should the release be called?")]]
    running = asyncio.create_task(A2ABridge(a2a, ask, "agents").send("deploy, then name it"))
    first = await askhuman.next_card(channel="C0AGENTS", timeout=15)
    paused = await paused_task(ask, a2a)
    await askhuman.click(first, "Deploy", values={"env": "Staging"})

    second = await askhuman.next_card(channel="C0AGENTS", timeout=15)
    assert "What should the release be called?" in second.text
    assert "Answer" in second.fields and second.buttons == ["Send"], second
    assert (await paused_task(ask, a2a)).id == paused.id
    await askhuman.click(second, "Send", values={"answer": "Blue Heron"})
    task = await asyncio.wait_for(running, 15)

    assert task.id == paused.id and task.status.state == TaskState.TASK_STATE_COMPLETED
    (_, picked), (typed, answered) = told(scripted, task)
    assert picked["values"]["env"] == "staging"
    assert typed == "Blue Heron" and answered["values"]["answer"] == "Blue Heron"
    assert get_message_text(task.status.message) == "done: Blue Heron"


# ------------------------------------------------------------------ nobody answers


async def test_a_timeout_is_told_to_the_agent_as_no_answer(
        askhuman: Served, ask: AsyncClient, a2a: Client,
        agent: tuple[ScriptedAgent, str]) -> None:
    scripted = agent[0]
    scripted.scripts["deploy in a hurry"] = [ask_with(DEPLOY)]
    running = asyncio.create_task(A2ABridge(a2a, ask, "quick").send("deploy in a hurry"))
    await askhuman.next_card(channel="C0QUICK", timeout=15)   # nobody clicks it
    task = await asyncio.wait_for(running, 20)

    assert task.status.state == TaskState.TASK_STATE_COMPLETED   # the agent decided
    [(text, data)] = told(scripted, task)
    assert data["status"] == "timeout" and data["action"]["id"] != "approve"
    assert text.startswith("No one answered") and "Nothing was chosen or approved." in text


async def test_a_timeout_can_cancel_the_task_instead(
        askhuman: Served, ask: AsyncClient, agent: tuple[ScriptedAgent, str]) -> None:
    scripted, url = agent
    scripted.scripts["deploy or drop it"] = [ask_with(DEPLOY)]
    sent: list[dict[str, Any]] = []

    async def record(request: httpx.Request) -> None:
        if request.method == "POST":
            sent.append(json.loads(request.content))

    async with httpx.AsyncClient(event_hooks={"request": [record]}) as http:
        a2a = await _a2a_client(url, http, streaming=True)
        bridge = A2ABridge(a2a, ask, "quick", on_no_answer="cancel")
        running = asyncio.create_task(bridge.send("deploy or drop it"))
        await askhuman.next_card(channel="C0QUICK", timeout=15)
        task = await asyncio.wait_for(running, 20)
        await a2a.close()

    assert task.status.state == TaskState.TASK_STATE_CANCELED
    assert task.id in scripted.cancelled
    assert told(scripted, task) == []   # no message pretended to be an answer
    [cancel] = [body["params"] for body in sent if body["method"] == "CancelTask"]
    assert cancel["id"] == task.id and cancel["metadata"]["askhuman"]["status"] == "timeout"


async def test_stopping_the_bridge_withdraws_the_card(
        askhuman: Served, ask: AsyncClient, a2a: Client,
        agent: tuple[ScriptedAgent, str]) -> None:
    scripted = agent[0]
    scripted.scripts["deploy, maybe"] = [ask_with(DEPLOY)]
    running = asyncio.create_task(A2ABridge(a2a, ask, "agents").send("deploy, maybe"))
    await askhuman.next_card(channel="C0AGENTS", timeout=15)
    paused = await paused_task(ask, a2a)
    request = await asking(ask)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running

    assert (await ask.get(request.ref)).status == "cancelled"
    still = await a2a.get_task(GetTaskRequest(id=paused.id))
    assert still.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert told(scripted, still) == []


# ------------------------------------------------------------------ the edges


async def test_an_answer_to_a_question_no_longer_asked_is_dropped(
        askhuman: Served, ask: AsyncClient, a2a: Client,
        agent: tuple[ScriptedAgent, str]) -> None:
    """Another client answered the task while the card waited: the click comes too
    late and is not sent, so the agent never hears two answers to one question."""
    scripted = agent[0]
    scripted.scripts["deploy from two places"] = [ask_with(DEPLOY)]
    running = asyncio.create_task(A2ABridge(a2a, ask, "agents").send("deploy from two places"))
    card = await askhuman.next_card(channel="C0AGENTS", timeout=15)
    paused = await paused_task(ask, a2a)
    elsewhere = Message(role=Role.ROLE_USER, message_id="from-the-cli", task_id=paused.id,
                        context_id=paused.context_id, parts=[new_text_part("yes, from the CLI")])
    async for _ in a2a.send_message(SendMessageRequest(message=elsewhere)):
        pass
    await askhuman.click(card, "Reject", reason="Too late, I hope.")
    task = await asyncio.wait_for(running, 15)

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert told(scripted, task) == [("yes, from the CLI", None)]


async def test_the_same_question_never_makes_two_cards(
        askhuman: Served, ask: AsyncClient, a2a: Client,
        agent: tuple[ScriptedAgent, str]) -> None:
    """A bridge restarted on a task that is still asking finds the card the first run
    raised, and gets the same answer from it."""
    scripted = agent[0]
    scripted.scripts["deploy after a crash"] = [ask_with(DEPLOY)]
    start = Message(role=Role.ROLE_USER, message_id="crash-1",
                    parts=[new_text_part("deploy after a crash")])
    async for _ in a2a.send_message(SendMessageRequest(message=start)):
        pass
    task = await a2a.get_task(GetTaskRequest(id=scripted.started["deploy after a crash"]))
    first = asyncio.create_task(A2ABridge(a2a, ask, "agents").ask(task))
    card = await askhuman.next_card(channel="C0AGENTS", timeout=15)
    again = asyncio.create_task(A2ABridge(a2a, ask, "agents").ask(task))
    with pytest.raises(AssertionError, match="no new card"):
        await askhuman.next_card(channel="C0AGENTS", timeout=1)
    await askhuman.click(card, "Approve")
    one, other = await asyncio.wait_for(asyncio.gather(first, again), 15)
    assert one.ref == other.ref
    assert other.result is not None and other.result.action is not None
    assert other.result.action.id == "approve"


def test_whole_numbers_in_an_agents_args_go_out_as_integers() -> None:
    """An A2A data part carries numbers as floats; the API reads whole ones strictly."""
    args = {"question": "How many replicas?", "fields": [
        {"type": "number", "name": "replicas", "label": "Replicas", "default": 3,
         "min_value": 1, "max_value": 2.5}]}
    [field] = question_args(Message(parts=ask_with(args)))["fields"]
    assert field["default"] == 3 and isinstance(field["default"], int)
    assert isinstance(field["min_value"], int) and field["max_value"] == 2.5


def test_a_long_text_question_is_cut_and_shown_whole_below() -> None:
    text = "Please review this plan. " * 100
    args = question_args(Message(parts=[new_text_part(text)]))
    assert len(args["question"]) == 1000 and args["question"].endswith("…")
    assert args["markdown"] == text.strip()
    assert [f["name"] for f in args["fields"]] == ["answer"]


async def test_a_refused_question_raises_and_tells_the_agent_nothing(
        ask: AsyncClient, a2a: Client, agent: tuple[ScriptedAgent, str]) -> None:
    """ask_human args the route's guardrails refuse are the agent's mistake: the
    bridge raises the API's 422 rather than inventing an answer."""
    scripted = agent[0]
    too_many = {"question": "Pick one", "actions": [
        {"id": f"a{n}", "label": f"Option {n}"} for n in range(9)]}
    scripted.scripts["ask badly"] = [ask_with(too_many)]
    with pytest.raises(ValidationFailed):
        await A2ABridge(a2a, ask, "agents").send("ask badly")
    assert scripted.seen[scripted.started["ask badly"]] == []


async def test_a_plain_reply_without_a_task_comes_back_as_it_is(
        ask: AsyncClient, a2a: Client, agent: tuple[ScriptedAgent, str]) -> None:
    agent[0].scripts["hello"] = []
    answer = await A2ABridge(a2a, ask, "agents").send("hello")
    assert isinstance(answer, Message) and get_message_text(answer) == "hello to you too"
