"""LangGraph and LangChain, for real: ``create_agent`` with ``HumanInTheLoopMiddleware``
and a checkpointer, driven by langchain_core's fake chat model, answered by Alice in the
served askhuman's Slack.

Each test shows the pause (the interrupt), the card, the click, and what the tool and
the model get after the resume. The model's record (``ScriptedChat.seen``) is what it
was actually shown on its next turn.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import json
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from askhuman_client import AsyncClient
from askhuman_client._langgraph_reviews import reviews_of
from askhuman_client.langgraph import (
    DecisionNotAllowed,
    ask_interrupt,
    ask_resume,
    ask_resume_sync,
    hitl_decisions,
    hitl_resume,
    hitl_resume_sync,
)
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command, interrupt
from pydantic import Field
from served import QUICK, Card, Served
from typing_extensions import TypedDict

# --- the agent: a scripted model and two real tools -----------------------------------


class ScriptedChat(GenericFakeChatModel):
    """langchain_core's fake chat model (it replays ``messages``), plus what
    ``create_agent`` needs of a real one: ``bind_tools``, and a record of every prompt."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChat:
        return self

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)


SENT: list[dict[str, str]] = []
DELETED: list[str] = []


@tool
def send_email(to: str, subject: str) -> str:
    """Send an email."""
    SENT.append({"to": to, "subject": subject})
    return f"sent to {to}"


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    DELETED.append(path)
    return f"deleted {path}"


@tool
def ask_user(question: str) -> str:
    """Ask the user (answered by a person through the middleware, never run)."""
    raise AssertionError("a respond decision must not run the tool")


def calls(*named: tuple[str, dict[str, Any]]) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": n, "args": a, "id": f"call_{i}"}
                                     for i, (n, a) in enumerate(named)])


def agent(turn: AIMessage, interrupt_on: dict[str, Any], **hitl: Any) -> tuple[Any, ScriptedChat]:
    model = ScriptedChat(messages=iter([turn, AIMessage("All done.")]))
    graph = create_agent(model, tools=[send_email, delete_file, ask_user],
                         middleware=[HumanInTheLoopMiddleware(interrupt_on, **hitl)],
                         checkpointer=InMemorySaver())
    return graph, model


DOCS = Path(__file__).resolve().parents[3] / "docs" / "integrations" / "langgraph.md"
CONFIG = {"configurable": {"thread_id": "t"}}
EMAIL = ("send_email", {"to": "ann@example.com", "subject": "Q3 numbers"})


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    SENT.clear()
    DELETED.clear()
    yield


@pytest.fixture
async def client(askhuman: Served) -> Any:
    async with askhuman.async_client() as c:
        yield c


async def start(graph: Any) -> Any:
    """Run until the middleware pauses; nothing has run yet."""
    paused = await graph.ainvoke({"messages": [{"role": "user", "content": "go"}]}, CONFIG,
                                 version="v2")
    assert paused.interrupts and not SENT and not DELETED
    return paused


def tool_messages(model: ScriptedChat) -> list[ToolMessage]:
    """The tool results the model was shown on its last turn."""
    return [m for m in model.seen[-1] if isinstance(m, ToolMessage)]


def shows(card: Card, *texts: str) -> bool:
    """Whether Alice can read every one of ``texts`` on the card (its blocks)."""
    seen = card.text + json.dumps(card.blocks, ensure_ascii=False)
    return all(text in seen for text in texts)


async def answered(task: asyncio.Task[Any]) -> Any:
    return await asyncio.wait_for(task, 20)


# --- HumanInTheLoopMiddleware ---------------------------------------------------------

# The snippet of docs/integrations/langgraph.md, verbatim (test_the_docs_snippet checks).
async def email_with_approval(client: AsyncClient, model: BaseChatModel) -> list[BaseMessage]:
    agent = create_agent(model, tools=[send_email],
                         middleware=[HumanInTheLoopMiddleware({"send_email": True})],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "mail-1"}}
    result = await agent.ainvoke({"messages": [{"role": "user", "content": "Mail Ann"}]},
                                 config, version="v2")
    while result.interrupts:  # paused before send_email: ask in Slack, resume with the answer
        command = await hitl_resume(client, result, route="agents")
        result = await agent.ainvoke(command, config, version="v2")
    return list(result.value["messages"])


async def test_the_docs_snippet(askhuman: Served, client: AsyncClient) -> None:
    model = ScriptedChat(messages=iter([calls(EMAIL), AIMessage("Mailed Ann.")]))
    running = asyncio.create_task(email_with_approval(client, model))
    await askhuman.click(await askhuman.next_card(), "Approve")
    messages = await answered(running)
    assert SENT == [{"to": "ann@example.com", "subject": "Q3 numbers"}]
    assert messages[-1].content == "Mailed Ann."
    assert inspect.getsource(email_with_approval) in DOCS.read_text()



async def test_approve_runs_the_tool(askhuman: Served, client: AsyncClient) -> None:
    graph, model = agent(calls(EMAIL), {"send_email": True})
    paused = await start(graph)
    [value] = [i.value for i in paused.interrupts]
    assert value["action_requests"][0]["name"] == "send_email"

    resuming = asyncio.create_task(hitl_resume(client, paused, route="agents"))
    card = await askhuman.next_card()
    assert shows(card, "send_email", "ann@example.com", "Q3 numbers")
    assert {"Approve", "Edit and approve", "Reject"} <= set(card.buttons)
    await askhuman.click(card, "Approve")
    command = await answered(resuming)

    assert command.resume == {paused.interrupts[0].id: {"decisions": [{"type": "approve"}]}}
    done = await graph.ainvoke(command, CONFIG, version="v2")
    assert SENT == [{"to": "ann@example.com", "subject": "Q3 numbers"}]
    assert tool_messages(model)[0].content == "sent to ann@example.com"
    assert done.value["messages"][-1].content == "All done." and not done.interrupts


async def test_reject_reason_reaches_the_model(askhuman: Served, client: AsyncClient) -> None:
    graph, model = agent(calls(EMAIL), {"send_email": True})
    paused = await start(graph)
    resuming = asyncio.create_task(hitl_resume(client, paused, route="agents"))
    card = await askhuman.next_card()
    await askhuman.click(card, "Reject", reason="not before the board meeting")
    await graph.ainvoke(await answered(resuming), CONFIG, version="v2")

    assert SENT == []
    [shown] = tool_messages(model)
    assert shown.status == "error"
    assert re.search(r"Rejected by \w+: not before the board meeting", str(shown.content))


async def test_edit_runs_the_edited_call(askhuman: Served, client: AsyncClient) -> None:
    graph, model = agent(calls(EMAIL), {"send_email": True})
    paused = await start(graph)
    resuming = asyncio.create_task(hitl_resume(client, paused, route="agents"))
    card = await askhuman.next_card()
    await askhuman.edit(card, {"to": "board@example.com"})
    command = await answered(resuming)

    [decision] = command.resume[paused.interrupts[0].id]["decisions"]
    assert decision == {"type": "edit", "edited_action": {
        "name": "send_email", "args": {"to": "board@example.com", "subject": "Q3 numbers"}}}
    await graph.ainvoke(command, CONFIG, version="v2")
    assert SENT == [{"to": "board@example.com", "subject": "Q3 numbers"}]
    assert "human reviewer replaced this tool call" in str(tool_messages(model)[0].content)


async def test_timeout_is_a_truthful_reject(askhuman: Served, client: AsyncClient) -> None:
    graph, model = agent(calls(EMAIL), {"send_email": True})
    paused = await start(graph)
    command = await asyncio.wait_for(hitl_resume(client, paused, route="quick"), 20)
    await askhuman.next_card(QUICK)  # posted, then nobody answered within 2 s

    await graph.ainvoke(command, CONFIG, version="v2")
    assert SENT == []
    [shown] = tool_messages(model)
    assert "No one answered" in str(shown.content) and "not run" in str(shown.content)


async def test_two_calls_in_one_interrupt_answered_in_order(askhuman: Served,
                                                            client: AsyncClient) -> None:
    graph, model = agent(calls(EMAIL, ("delete_file", {"path": "/srv/report.pdf"})),
                         {"send_email": True, "delete_file": True})
    paused = await start(graph)
    assert [a["name"] for a in paused.interrupts[0].value["action_requests"]] == \
        ["send_email", "delete_file"]
    resuming = asyncio.create_task(hitl_resume(client, paused, route="agents"))
    first, second = await askhuman.next_card(), await askhuman.next_card()
    # posted in the order of the calls
    assert shows(first, "send_email") and shows(second, "delete_file", "/srv/report.pdf")
    await askhuman.click(second, "Reject", reason="keep the report")  # answered out of order
    await askhuman.click(first, "Approve")
    command = await answered(resuming)

    decisions = command.resume[paused.interrupts[0].id]["decisions"]
    assert [d["type"] for d in decisions] == ["approve", "reject"]
    await graph.ainvoke(command, CONFIG, version="v2")
    assert len(SENT) == 1 and DELETED == []
    by_call = {m.tool_call_id: str(m.content) for m in tool_messages(model)}
    assert by_call["call_0"] == "sent to ann@example.com"
    assert "keep the report" in by_call["call_1"]


async def test_per_call_mode_answers_each_interrupt_by_id(askhuman: Served,
                                                          client: AsyncClient) -> None:
    graph, _ = agent(calls(EMAIL, ("delete_file", {"path": "/tmp/x"})),
                         {"send_email": True, "delete_file": {"allowed_decisions":
                                                              ["approve", "reject"]}},
                         interrupt_mode="per_call")
    paused = await start(graph)
    assert len(paused.interrupts) == 2
    resuming = asyncio.create_task(hitl_resume(client, paused, route="agents"))
    email, delete = await askhuman.next_card(), await askhuman.next_card()
    assert "Edit and approve" in email.buttons and "Edit and approve" not in delete.buttons
    await askhuman.edit(email, {"subject": "Q3 numbers (draft)"})
    await askhuman.click(delete, "Approve")
    command = await answered(resuming)

    edited = {"name": "send_email", "args": {"to": "ann@example.com",
                                             "subject": "Q3 numbers (draft)"}}
    assert list(command.resume.values()) == [{"type": "edit", "edited_action": edited},
                                             {"type": "approve"}]
    await graph.ainvoke(command, CONFIG, version="v2")
    assert [edited["args"]] == SENT and DELETED == ["/tmp/x"]


async def test_edit_is_not_offered_when_the_config_forbids_it(askhuman: Served,
                                                              client: AsyncClient) -> None:
    graph, _ = agent(calls(EMAIL), {"send_email": {"allowed_decisions": ["approve", "reject"]}})
    paused = await start(graph)
    deciding = asyncio.create_task(hitl_decisions(client, paused.interrupts[0], route="agents",
                                                  agent_name="mailer", context={"run": "r-7"}))
    card = await askhuman.next_card()
    assert "Edit and approve" not in card.buttons and "Approve" in card.buttons
    assert shows(card, "mailer")
    asked = (await client.list(status="open", route="agents")).items[0]  # newest first
    assert asked.context == {"run": "r-7"} and asked.agent_name == "integrations/mailer"
    await askhuman.click(card, "Approve")
    assert await answered(deciding) == [{"type": "approve"}]


async def test_a_refusal_the_config_forbids_leaves_the_graph_paused(
        askhuman: Served, client: AsyncClient) -> None:
    graph, _ = agent(calls(EMAIL), {"send_email": {"allowed_decisions": ["approve", "edit"]}})
    paused = await start(graph)
    resuming = asyncio.create_task(hitl_resume(client, paused, route="agents"))
    card = await askhuman.next_card()
    await askhuman.click(card, "Reject", reason="no")
    with pytest.raises(DecisionNotAllowed, match="allows only approve, edit") as refused:
        await answered(resuming)
    assert refused.value.wanted == "reject" and refused.value.request.status == "submitted"
    assert (await graph.aget_state(CONFIG)).interrupts and SENT == []

    # Asking again finds the same card and its answer: no second card is posted.
    posted = len(await askhuman.cards())
    with pytest.raises(DecisionNotAllowed) as again:
        await asyncio.wait_for(hitl_resume(client, paused, route="agents"), 20)
    assert again.value.request.ref == refused.value.request.ref
    assert len(await askhuman.cards()) == posted


async def test_edit_only_tool_approved_as_is(askhuman: Served, client: AsyncClient) -> None:
    graph, _ = agent(calls(EMAIL), {"send_email": {"allowed_decisions": ["edit"]}})
    paused = await start(graph)
    deciding = asyncio.create_task(hitl_decisions(client, paused.interrupts[0], route="agents"))
    await askhuman.click(await askhuman.next_card(), "Approve")
    # approve is not allowed: the approval is the edit that changes nothing
    assert await answered(deciding) == [{"type": "edit", "edited_action": {
        "name": "send_email", "args": {"to": "ann@example.com", "subject": "Q3 numbers"}}}]


async def test_respond_answers_an_ask_user_tool(askhuman: Served, client: AsyncClient) -> None:
    graph, model = agent(calls(("ask_user", {"question": "Which colour?"})),
                         {"ask_user": {"allowed_decisions": ["respond", "reject"],
                                       "description": "Which colour should the logo be?"}})
    paused = await start(graph)
    resuming = asyncio.create_task(hitl_resume(client, paused, route="agents"))
    card = await askhuman.next_card()
    assert shows(card, "Which colour should the logo be?")
    assert {"Send answer", "Reject"} <= set(card.buttons) and "Your answer" in card.fields
    await askhuman.click(card, "Send answer", values={"response": "teal"})
    command = await answered(resuming)

    assert command.resume[paused.interrupts[0].id] == {
        "decisions": [{"type": "respond", "message": "teal"}]}
    await graph.ainvoke(command, CONFIG, version="v2")
    [shown] = tool_messages(model)
    assert shown.content == "teal" and shown.status == "success"


async def test_reject_on_an_answer_card(askhuman: Served, client: AsyncClient) -> None:
    # interrupt_on=True allows all four decisions: answer_tools asks for an answer anyway
    graph, model = agent(calls(("ask_user", {"question": "Which colour?"})), {"ask_user": True})
    paused = await start(graph)
    resuming = asyncio.create_task(hitl_resume(client, paused, route="agents",
                                               answer_tools=["ask_user"]))
    card = await askhuman.next_card()
    assert "Send answer" in card.buttons and "Approve" not in card.buttons
    await askhuman.click(card, "Reject", reason="we keep the old logo")
    await graph.ainvoke(await answered(resuming), CONFIG, version="v2")
    [shown] = tool_messages(model)
    assert shown.status == "error" and "we keep the old logo" in str(shown.content)


async def test_sync_helper_for_invoke(askhuman: Served) -> None:
    graph, _ = agent(calls(EMAIL), {"send_email": True})
    paused = graph.invoke({"messages": [{"role": "user", "content": "go"}]}, CONFIG)
    assert "__interrupt__" in paused  # the v1 output: a dict
    with askhuman.client() as sync_client:
        resuming = asyncio.create_task(asyncio.to_thread(
            hitl_resume_sync, sync_client, paused, route="agents"))
        card = await askhuman.next_card()
        await askhuman.click(card, "Approve")
        command = await answered(resuming)
    graph.invoke(command, CONFIG, version="v2")
    assert SENT == [{"to": "ann@example.com", "subject": "Q3 numbers"}]


# --- a plain interrupt(value) in your own node ----------------------------------------


class Release(TypedDict, total=False):
    version: str
    answer: dict[str, Any]
    notes: dict[str, Any]


def ask_to_ship(state: Release) -> Release:
    answer = interrupt({"question": f"Ship {state['version']}?", "actions": [
        {"id": "ship", "label": "Ship it", "style": "primary"},
        {"id": "hold", "label": "Hold"}]})
    return {"answer": answer}


def ask_for_notes(state: Release) -> Release:
    return {"notes": interrupt("Anything to add to the release notes?")}


def release_graph(*nodes: Any) -> Any:
    builder = StateGraph(Release)
    for node in nodes:
        builder.add_node(node)
        builder.add_edge(START, node.__name__)
    return builder.compile(checkpointer=InMemorySaver())


async def test_plain_interrupt_resumes_with_the_answer(askhuman: Served,
                                                       client: AsyncClient) -> None:
    graph = release_graph(ask_to_ship)
    paused = await graph.ainvoke({"version": "1.4.0"}, CONFIG, version="v2")
    resuming = asyncio.create_task(ask_resume(client, paused, route="agents"))
    card = await askhuman.next_card()
    assert shows(card, "Ship 1.4.0?") and {"Ship it", "Hold"} <= set(card.buttons)
    await askhuman.click(card, "Hold")
    done = await graph.ainvoke(await answered(resuming), CONFIG, version="v2")

    answer = done.value["answer"]
    assert answer["status"] == "submitted" and answer["action"]["id"] == "hold"
    assert inspect.getsource(ask_to_ship) in DOCS.read_text()  # the docs show this node
    with pytest.raises(ValueError, match="use ask_resume"):
        await hitl_resume(client, paused, route="agents")


async def test_cancelled_request_is_a_truthful_reject(askhuman: Served,
                                                      client: AsyncClient) -> None:
    graph, model = agent(calls(EMAIL), {"send_email": True})
    paused = await start(graph)
    resuming = asyncio.create_task(hitl_resume(client, paused, route="agents"))
    await askhuman.next_card()
    open_request = (await client.list(status="open", route="agents")).items[0]  # newest first
    await client.cancel(open_request.ref, "the run was stopped")
    await graph.ainvoke(await answered(resuming), CONFIG, version="v2")
    [shown] = tool_messages(model)
    assert "was cancelled; the call was not run" in str(shown.content) and SENT == []


async def test_several_plain_interrupts_and_a_timeout(askhuman: Served,
                                                      client: AsyncClient) -> None:
    graph = release_graph(ask_to_ship, ask_for_notes)  # both run in one step, both pause
    paused = await graph.ainvoke({"version": "2.0.0"}, CONFIG, version="v2")
    assert len(paused.interrupts) == 2
    command = await asyncio.wait_for(ask_resume(client, paused, route="quick"), 20)
    assert set(command.resume) == {i.id for i in paused.interrupts}
    cards = [await askhuman.next_card(QUICK), await askhuman.next_card(QUICK)]
    assert any(shows(c, "Ship 2.0.0?") for c in cards)
    assert any(shows(c, "release notes") for c in cards)

    done = await graph.ainvoke(command, CONFIG, version="v2")
    for result in (done.value["answer"], done.value["notes"]):
        assert result["status"] == "timeout" and result["message"]


async def test_ask_interrupt_with_a_bare_question(askhuman: Served,
                                                  client: AsyncClient) -> None:
    result = await asyncio.wait_for(ask_interrupt(client, "Deploy now?", route="quick"), 20)
    card = await askhuman.next_card(QUICK)
    assert shows(card, "Deploy now?")
    assert result["status"] == "timeout" and "did not respond" in result["message"]


async def test_plain_interrupt_sync_with_a_text_answer(askhuman: Served) -> None:
    graph = release_graph(ask_for_notes)
    paused = graph.invoke({"version": "3.0"}, CONFIG, version="v2")
    with askhuman.client() as sync_client:
        resuming = asyncio.create_task(asyncio.to_thread(
            ask_resume_sync, sync_client, paused, route="agents"))
        card: Card = await askhuman.next_card()
        assert shows(card, "release notes")
        await askhuman.click(card, card.buttons[0])
        command: Command = await answered(resuming)
    done = graph.invoke(command, CONFIG, version="v2")
    assert done.value["notes"]["status"] == "submitted"


async def test_helpers_refuse_the_other_kind_of_interrupt(client: AsyncClient) -> None:
    graph, _ = agent(calls(EMAIL), {"send_email": True})
    paused = await start(graph)
    with pytest.raises(ValueError, match="use hitl_resume"):
        await ask_resume(client, paused, route="agents")
    per_call, _ = agent(calls(EMAIL), {"send_email": True}, interrupt_mode="per_call")
    value = (await per_call.ainvoke({"messages": [{"role": "user", "content": "go"}]},
                                    {"configurable": {"thread_id": "p"}},
                                    version="v2")).interrupts[0].value
    with pytest.raises(ValueError, match="pass the Interrupt"):
        await hitl_decisions(client, value, route="agents")
    with pytest.raises(ValueError, match="no pending interrupt"):
        await hitl_resume(client, await graph.aget_state({"configurable": {"thread_id": "x"}}),
                          route="agents")


# --- the example script runs as documented --------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "langgraph_approvals.py"


async def test_the_example_runs(askhuman: Served) -> None:
    spec = importlib.util.spec_from_file_location("langgraph_approvals", EXAMPLE)
    assert spec and spec.loader
    example = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = example  # its TypedDict's hints resolve in its own globals
    spec.loader.exec_module(example)
    with askhuman.client() as sync_client:
        running = asyncio.create_task(asyncio.to_thread(example.run_agent, sync_client,
                                                        "agents"))
        await askhuman.edit(await askhuman.next_card(), {"to": "cfo@example.com"})
        messages = await answered(running)
        asking = asyncio.create_task(asyncio.to_thread(example.release_notes, sync_client,
                                                       "agents"))
        card = await askhuman.next_card()
        await askhuman.click(card, card.buttons[0], values={card.fields[0]: "Faster exports"})
        notes = await answered(asking)
    assert "sent 'Q3 numbers' to cfo@example.com" in str(messages[-2].content)
    assert messages[-1].content == "Done: the email step is finished."
    assert notes["status"] == "submitted"


async def test_per_call_reviews_read_the_response_schema() -> None:
    """What a per-call interrupt allows is only in its JSON response_schema: a single
    decision is a plain object schema, several a discriminated union."""
    only, _ = agent(calls(EMAIL, ("delete_file", {"path": "/x"})),
                    {"send_email": True, "delete_file": {"allowed_decisions": ["approve"]}},
                    interrupt_mode="per_call")
    paused = await start(only)
    email, delete = [reviews_of(i.value, i.response_schema, i.id)[0] for i in paused.interrupts]
    assert email.allowed == ("approve", "edit", "reject", "respond")
    assert email.input_schema and set(email.input_schema["properties"]) == {"to", "subject"}
    assert delete.allowed == ("approve",) and delete.key == f"langgraph-{paused.interrupts[1].id}-0"
