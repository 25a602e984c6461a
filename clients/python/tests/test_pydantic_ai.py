"""pydantic-ai's deferred tools, answered by people through a served askhuman.

A real pydantic-ai ``Agent`` whose model is pydantic-ai's own ``FunctionModel``
driven by ``Script``: it makes the scripted tool calls, then records every tool result
it is sent and answers "done". No network, no key.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Annotated, Any

import pytest
from askhuman_client import Forbidden
from askhuman_client.pydantic_ai import (
    UnansweredCalls,
    ask_human_tool,
    ask_human_toolset,
    resolve_with_askhuman,
    run_with_askhuman,
)
from pydantic import Field, TypeAdapter
from pydantic_ai import (
    Agent,
    ApprovalRequired,
    DeferredToolRequests,
    DeferredToolResults,
    RunContext,
    ToolApproved,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import ExternalToolset

REQUESTS = TypeAdapter(DeferredToolRequests)
RESULTS = TypeAdapter(DeferredToolResults)
SELECT_ENV = {
    "question": "Which environment should I deploy to?",
    "fields": [{"type": "select", "name": "env", "label": "Environment", "required": True,
                "options": [{"value": "staging", "label": "Staging"},
                            {"value": "prod", "label": "Production"}]}],
}


class Script:
    """A model that first makes ``turns[0]``'s calls, then each next turn's after the
    results come back, then says "done"; ``seen`` holds every tool result it was sent,
    by call id (the text the model reads for a retry)."""

    def __init__(self, *turns: list[ToolCallPart]) -> None:
        self.turns = list(turns)
        self.seen: dict[str, Any] = {}
        self.tools: dict[str, Any] = {}

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.tools = {t.name: t for t in info.function_tools}
        last = messages[-1]
        if isinstance(last, ModelRequest):
            for part in last.parts:
                if isinstance(part, ToolReturnPart):
                    self.seen[part.tool_call_id] = part.content
                elif isinstance(part, RetryPromptPart) and part.tool_call_id:
                    self.seen[part.tool_call_id] = part.model_response()
        if self.turns:
            return ModelResponse(parts=list(self.turns.pop(0)))
        return ModelResponse(parts=[TextPart("done")])


class Ops:
    """An agent with a ``scale`` tool that needs approval and the external ``ask_human``;
    ``ran`` is what ``scale`` really did."""

    def __init__(self, script: Script) -> None:
        self.ran: list[tuple[str, int]] = []
        self.agent: Agent[None, str | DeferredToolRequests] = Agent(
            FunctionModel(script), name="ops-agent", output_type=[str, DeferredToolRequests],
            toolsets=[ask_human_toolset()])

        @self.agent.tool_plain(requires_approval=True)
        def scale(service: str, replicas: Annotated[int, Field(ge=1, le=20)]) -> str:
            """Scale a service."""
            self.ran.append((service, replicas))
            return f"scaled {service} to {replicas}"


def shown(card: Any) -> str:
    """Everything a card shows (its text and blocks, where the arguments are)."""
    return card.text + json.dumps(card.blocks, ensure_ascii=False)


def scale(service: str, replicas: int, call_id: str) -> ToolCallPart:
    return ToolCallPart("scale", {"service": service, "replicas": replicas},
                        tool_call_id=call_id)


def ask(args: dict[str, Any], call_id: str) -> ToolCallPart:
    return ToolCallPart("ask_human", args, tool_call_id=call_id)


# ------------------------------------------------------------- the remote shape


async def test_the_run_pauses_and_an_approval_answers_it_as_data(askhuman: Any) -> None:
    """The agent's process and the answering process share only JSON."""
    script = Script([scale("api", 10, "c-1")])
    ops = Ops(script)
    paused = await ops.agent.run("scale api to 10")
    assert isinstance(paused.output, DeferredToolRequests) and ops.ran == []
    assert [p.tool_call_id for p in paused.output.approvals] == ["c-1"]
    sent = REQUESTS.dump_json(paused.output)  # what the agent's process hands over

    async with askhuman.async_client() as client:
        answering = asyncio.create_task(resolve_with_askhuman(
            REQUESTS.validate_json(sent), client=client, route="agents"))
        card = await askhuman.next_card(channel="C0AGENTS")
        assert "scale" in card.text and "*service*: api" in shown(card)
        assert "*replicas*: 10" in shown(card)
        assert "Approve" in card.buttons and "Reject" in card.buttons
        assert "Edit and approve" not in card.buttons  # not editable unless the caller says
        assert not answering.done()
        await askhuman.click(card, "Approve")
        results = RESULTS.validate_json(RESULTS.dump_json(await answering))

    assert results.approvals == {"c-1": ToolApproved()}
    seen = results.metadata["c-1"]["askhuman"]
    assert seen["status"] == "submitted" and seen["edited"] is False and seen["decided_by"]
    assert results.answered_by == {"c-1": seen["decided_by"]}
    resumed = await ops.agent.run(None, message_history=paused.all_messages(),
                                  deferred_tool_results=results)
    assert resumed.output == "done" and ops.ran == [("api", 10)]
    assert script.seen == {"c-1": "scaled api to 10"}


# ------------------------------------------------------------- reject, edit


async def test_a_reject_reason_reaches_the_model_and_the_tool_never_runs(askhuman: Any) -> None:
    script = Script([scale("api", 12, "c-2")])
    ops = Ops(script)
    async with askhuman.async_client() as client:
        running = asyncio.create_task(
            run_with_askhuman(ops.agent, "scale api to 12", client=client, route="agents"))
        card = await askhuman.next_card(channel="C0AGENTS")
        await askhuman.click(card, "Reject", reason="12 replicas would blow the budget")
        result = await running
    assert result.output == "done" and ops.ran == []
    assert script.seen["c-2"] == "Rejected by u0alice: 12 replicas would blow the budget"


async def test_an_edited_approval_runs_the_edited_call_and_the_model_is_told(
        askhuman: Any) -> None:
    script = Script([scale("api", 10, "c-3")])
    ops = Ops(script)
    async with askhuman.async_client() as client:
        running = asyncio.create_task(run_with_askhuman(
            ops.agent, "scale api to 10", client=client, route="agents",
            editable={"scale": ["replicas"]}))
        card = await askhuman.next_card(channel="C0AGENTS")
        assert "Edit and approve" in card.buttons
        refused = await askhuman.edit(card, {"replicas": 50})  # typed by the tool's schema
        assert "at most 20" in refused["body"] and not running.done()
        await askhuman.edit(card, {"replicas": 5})
        result = await running
    assert result.output == "done" and ops.ran == [("api", 5)]
    assert script.seen["c-3"] == (
        "scaled api to 5\n\nA reviewer (u0alice) edited the arguments before approving. "
        'The call ran with the edited arguments {"replicas": 5}.')


# ------------------------------------------------------------- ask_human


async def test_ask_human_with_a_select_gives_the_model_the_tool_result(askhuman: Any) -> None:
    script = Script([ask(SELECT_ENV, "c-4")])
    ops = Ops(script)
    async with askhuman.async_client() as client:
        running = asyncio.create_task(
            run_with_askhuman(ops.agent, "deploy", client=client, route="agents"))
        card = await askhuman.next_card(channel="C0AGENTS")
        assert "Which environment" in card.text and "Environment" in card.fields
        await askhuman.click(card, "Submit", values={"env": "Staging"})
        result = await running
    assert result.output == "done"
    answer = script.seen["c-4"]
    assert answer["status"] == "submitted"
    assert answer["action"]["id"] == "submit" and answer["values"] == {"env": "staging"}


async def test_ask_human_arguments_the_server_refuses_go_back_to_the_model(
        askhuman: Any) -> None:
    script = Script([ask({"question": "   "}, "c-5")])
    ops = Ops(script)
    async with askhuman.async_client() as client:
        before = len(await askhuman.cards("C0AGENTS"))
        result = await run_with_askhuman(ops.agent, "ask", client=client, route="agents")
    assert result.output == "done"
    assert "question" in script.seen["c-5"]  # Dify's error text, as a retry
    assert len(await askhuman.cards("C0AGENTS")) == before  # no card for a refused call


# ------------------------------------------------------------- timeout


async def test_nobody_answering_denies_the_call_and_times_out_the_question(
        askhuman: Any) -> None:
    script = Script([scale("db", 3, "c-6"), ask({"question": "Which day?"}, "c-7")])
    ops = Ops(script)
    async with askhuman.async_client() as client:
        result = await run_with_askhuman(ops.agent, "scale db", client=client, route="quick")
    assert result.output == "done" and ops.ran == []
    assert "in time" in script.seen["c-6"] and "not run" in script.seen["c-6"]
    assert script.seen["c-7"] == {
        "status": "timeout", "action": {"id": "__timeout", "label": "Timeout"}, "values": {},
        "message": "The human did not respond before the workflow timeout.",
        "rendered_content": None,
    }


# ------------------------------------------------------------- several at once


async def test_several_calls_in_one_step_are_asked_together(askhuman: Any) -> None:
    script = Script([scale("api", 4, "c-8"), scale("db", 2, "c-9"), ask(SELECT_ENV, "c-10")])
    ops = Ops(script)
    async with askhuman.async_client() as client:
        running = asyncio.create_task(
            run_with_askhuman(ops.agent, "scale both", client=client, route="agents"))
        cards = [await askhuman.next_card(channel="C0AGENTS") for _ in range(3)]
        assert not running.done()  # all three cards are out before anyone answers
        by_text = {("api" if "*service*: api" in shown(c) else
                    "db" if "*service*: db" in shown(c) else "ask"): c for c in cards}
        await askhuman.click(by_text["ask"], "Submit", values={"env": "Production"})
        await askhuman.click(by_text["db"], "Reject", reason="db stays at 3")
        await askhuman.click(by_text["api"], "Approve")
        result = await running
    assert result.output == "done" and ops.ran == [("api", 4)]
    assert script.seen["c-8"] == "scaled api to 4"
    assert "db stays at 3" in script.seen["c-9"]
    assert script.seen["c-10"]["values"] == {"env": "prod"}


async def test_a_second_stop_is_answered_too(askhuman: Any) -> None:
    script = Script([ask({"question": "Scale which service?"}, "c-11")],
                    [scale("api", 2, "c-12")])
    ops = Ops(script)
    async with askhuman.async_client() as client:
        running = asyncio.create_task(
            run_with_askhuman(ops.agent, "scale", client=client, route="agents"))
        await askhuman.click(await askhuman.next_card(channel="C0AGENTS"), "Submit")
        await askhuman.click(await askhuman.next_card(channel="C0AGENTS"), "Approve")
        result = await running
    assert result.output == "done" and ops.ran == [("api", 2)]
    assert script.seen["c-11"]["status"] == "submitted"


# ------------------------------------------------------------- bad paths, the tool


async def test_external_calls_askhuman_cannot_answer_stop_before_any_card(
        askhuman: Any) -> None:
    script = Script([ToolCallPart("lookup", {"id": 1}, tool_call_id="c-13")])
    agent = Agent(FunctionModel(script), output_type=[str, DeferredToolRequests],
                  toolsets=[ExternalToolset([ToolDefinition(name="lookup")])])
    async with askhuman.async_client() as client:
        before = len(await askhuman.cards("C0AGENTS"))
        with pytest.raises(UnansweredCalls, match="lookup"):
            await run_with_askhuman(agent, "look up", client=client, route="agents")
    assert len(await askhuman.cards("C0AGENTS")) == before


async def test_the_model_sees_ask_human_as_an_external_tool_with_dify_args() -> None:
    script = Script()
    await Ops(script).agent.run("hello")
    tool = script.tools["ask_human"]
    assert tool.kind == "external" and tool == ask_human_tool()
    properties = tool.parameters_json_schema["properties"]
    assert {"question", "title", "markdown", "fields", "actions", "urgency"} <= set(properties)
    assert tool.parameters_json_schema["required"] == ["question"]


# ------------------------------------------------------------- cancel, retries, reasons


async def test_cancelled_requests_deny_the_call_and_cancel_the_question(askhuman: Any) -> None:
    script = Script([scale("api", 7, "c-14"), ask({"question": "Really?"}, "c-15")])
    ops = Ops(script)
    async with askhuman.async_client() as client:
        running = asyncio.create_task(
            run_with_askhuman(ops.agent, "scale", client=client, route="agents"))
        for _ in range(2):
            await askhuman.next_card(channel="C0AGENTS")
        page = await client.list(status="open", route="agents")
        mine = [r for r in page.items if (r.context or {}).get("tool_call_id") in
                ("c-14", "c-15")]
        assert len(mine) == 2
        for request in mine:
            await client.cancel(request.ref, "the deploy was called off")
        result = await running
    assert result.output == "done" and ops.ran == []
    assert "cancelled" in script.seen["c-14"] and "not run" in script.seen["c-14"]
    assert script.seen["c-15"]["status"] == "cancelled"


async def test_a_caller_that_stops_waiting_withdraws_its_cards(askhuman: Any) -> None:
    ops = Ops(Script([scale("api", 6, "c-20"), ask({"question": "Sure?"}, "c-21")]))
    async with askhuman.async_client() as client:
        running = asyncio.create_task(
            run_with_askhuman(ops.agent, "scale", client=client, route="agents"))
        for _ in range(2):
            await askhuman.next_card(channel="C0AGENTS")
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        page = await client.list(route="agents", limit=10)
        mine = {(r.context or {}).get("tool_call_id"): r for r in page.items}
    assert mine["c-20"].status == mine["c-21"].status == "cancelled"
    assert mine["c-20"].result and "stopped waiting" in (mine["c-20"].result.message or "")
    assert mine["c-21"].result and "stopped waiting" in (mine["c-21"].result.message or "")
    assert ops.ran == []


async def test_the_same_key_prefix_asks_once_and_replays_the_answer(askhuman: Any) -> None:
    """A process that died after asking and resolves the same stop again gets the same
    requests (and their answers), never a second card."""
    ops = Ops(Script([scale("api", 9, "c-16")]))
    paused = await ops.agent.run("scale")
    assert isinstance(paused.output, DeferredToolRequests)
    async with askhuman.async_client() as client:
        first = asyncio.create_task(resolve_with_askhuman(
            paused.output, client=client, route="agents", key_prefix="conversation-42"))
        await askhuman.click(await askhuman.next_card(channel="C0AGENTS"), "Approve")
        answered = await first
        before = len(await askhuman.cards("C0AGENTS"))
        again = await resolve_with_askhuman(
            paused.output, client=client, route="agents", key_prefix="conversation-42")
    assert again.approvals == answered.approvals == {"c-16": ToolApproved()}
    assert again.metadata["c-16"]["askhuman"]["ref"] == answered.metadata["c-16"]["askhuman"]["ref"]
    assert len(await askhuman.cards("C0AGENTS")) == before


async def test_an_approval_required_reason_is_on_the_card_and_metadata_reaches_the_tool(
        askhuman: Any) -> None:
    script = Script([ToolCallPart("drop_table", {"table": "users"}, tool_call_id="c-17")])
    seen: list[Any] = []
    agent = Agent(FunctionModel(script), name="dba", output_type=[str, DeferredToolRequests])

    @agent.tool
    def drop_table(ctx: RunContext[None], table: str) -> str:
        """Drop a table."""
        if not ctx.tool_call_approved:
            raise ApprovalRequired(metadata={"reason": "The table is unused since May.",
                                             "ticket": "OPS-7"})
        seen.append(ctx.tool_call_metadata)
        return f"dropped {table}"

    async with askhuman.async_client() as client:
        running = asyncio.create_task(
            run_with_askhuman(agent, "drop users", client=client, route="agents"))
        card = await askhuman.next_card(channel="C0AGENTS")
        assert "The table is unused since May." in shown(card)
        await askhuman.click(card, "Approve")
        result = await running
    assert result.output == "done" and script.seen["c-17"] == "dropped users"
    assert seen[0]["ticket"] == "OPS-7" and seen[0]["askhuman"]["status"] == "submitted"


# ------------------------------------------------------------- the example


async def _example(*args: str, env: dict[str, str]) -> str:
    """Run ``examples/pydantic_ai_remote.py`` with this venv; its stdout."""
    script = Path(__file__).resolve().parents[3] / "examples" / "pydantic_ai_remote.py"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), *args, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_the_remote_example_pauses_is_answered_and_resumes(
        askhuman: Any, tmp_path: Path) -> None:
    env = {**os.environ, "ASKHUMAN_URL": askhuman.url, "ASKHUMAN_API_KEY": askhuman.api_key,
           "ASKHUMAN_ROUTE": "agents", "ASKHUMAN_STATE": str(tmp_path),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    env.pop("PYDANTIC_AI_MODEL", None)
    assert "paused: 1 approval(s)" in await _example("start", "scale web to 8", env=env)
    answering = asyncio.create_task(_example("answer", env=env))
    card = await askhuman.next_card(channel="C0AGENTS", timeout=30)
    assert "*service*: web" in shown(card) and "*replicas*: 8" in shown(card)
    await askhuman.edit(card, {"replicas": 3})
    await answering
    resumed = await _example("resume", env=env)
    assert resumed.startswith("scaled web to 3") and '{"replicas": 3}' in resumed


# ------------------------------------------------------------- the docs


def _docs_snippet() -> str:
    """The first Python block of docs/integrations/pydantic-ai.md, as an async function
    (its ``async with`` is top-level code in the docs)."""
    page = (Path(__file__).resolve().parents[3] / "docs" / "integrations" / "pydantic-ai.md")
    block = page.read_text(encoding="utf-8").split("```python\n", 1)[1].split("```", 1)[0]
    return "async def snippet():\n" + textwrap.indent(block, "    ")


async def test_the_docs_snippet_runs_as_written(askhuman: Any) -> None:
    script = Script([scale("api", 10, "c-18")])
    code = _docs_snippet().replace('"http://127.0.0.1:3000", "ahk_…"',
                                   f'"{askhuman.url}", "{askhuman.api_key}"')
    printed: list[Any] = []
    namespace: dict[str, Any] = {"model": FunctionModel(script), "print": printed.append}
    exec(compile(code, "pydantic-ai.md", "exec"), namespace)
    running = asyncio.create_task(namespace["snippet"]())
    card = await askhuman.next_card(channel="C0AGENTS")
    assert "Edit and approve" in card.buttons
    await askhuman.click(card, "Approve")
    await running
    assert printed == ["done"] and script.seen == {"c-18": "scaled api to 10"}


async def test_a_route_the_key_may_not_use_raises_the_clients_error(askhuman: Any) -> None:
    ops = Ops(Script([scale("api", 3, "c-19")]))
    async with askhuman.async_client() as client:
        with pytest.raises(Forbidden):
            await run_with_askhuman(ops.agent, "scale", client=client, route="finance")
    assert ops.ran == []
