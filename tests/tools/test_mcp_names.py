"""MCP tools from two servers (docs/tools.md, "Two servers, one tool name") and
``fixed`` arguments for MCP tools, with the example server started for real."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from bot.agents import AgentSpec, LocalRuntime
from bot.agents.base import AgentRuntimeError, ToolBindingError
from bot.askhuman.config import AskHumanConfig
from bot.askhuman.schema import AskHumanSelectedAction, AskHumanToolResult
from bot.tools.approval import ApprovalTicket
from bot.tools.binding import binding_hash
from bot.tools.config import ToolSettings
from tests.tools.mcp_server import STDIO_COMMAND, journal_lines, pids
from tests.tools.scripts import Scripted

TOOLS = TypeAdapter(list[ToolSettings])
APPROVED = AskHumanToolResult(status="submitted",
                              action=AskHumanSelectedAction(id="approve", label="Approve"))
FIX = "set `prefix: <name>` on one of them (its tools are then called <name>__scale)"


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "journal.txt"
    monkeypatch.setenv("OPS_JOURNAL", str(path))
    return path


def stdio(**entry: Any) -> dict[str, Any]:
    return {"mcp": {"command": STDIO_COMMAND, "env": ["OPS_JOURNAL"]}, **entry}


@pytest.fixture
async def agent() -> AsyncIterator[Any]:
    made: list[LocalRuntime] = []

    def build(tools: list[dict[str, Any]], ask_human: AskHumanConfig | None = None,
              ) -> tuple[LocalRuntime, Scripted, list[Any]]:
        seen: list[Any] = []
        script = Scripted(seen_tools=seen)
        spec = AgentSpec(name="ops", model="scripted:deploy",
                         ask_human=ask_human or AskHumanConfig(enabled=False),
                         tools=tuple(TOOLS.validate_python(tools)))
        runtime = LocalRuntime(spec, model=script.model)
        made.append(runtime)
        return runtime, script, seen

    yield build
    for runtime in made:
        await runtime.aclose()


# ---------------------------------------------------------------- two servers, one name


async def test_two_servers_with_the_same_tool_name_stop_the_run_with_the_fix(
    agent: Any, journal: Path
) -> None:
    runtime, script, _ = agent([stdio(approval="always"), stdio(approval="always")])
    script.steps = ([("scale", {"service": "api", "replicas": 2})],)
    with pytest.raises(AgentRuntimeError) as caught:
        await runtime.run("x")
    message = str(caught.value)
    assert message.startswith("agents.ops.tools.1 (MCP server ")
    assert "and agents.ops.tools.0 (MCP server " in message
    assert "both give the model a tool called 'scale'" in message
    assert "set `prefix: <name>` on one of them" in message
    assert journal_lines(journal) == []  # nothing ran, nothing was shadowed


def test_a_name_two_include_lists_share_is_refused_when_the_agent_is_built() -> None:
    with pytest.raises(AgentRuntimeError) as caught:
        LocalRuntime(AgentSpec(name="ops", model="scripted:deploy",
                               ask_human=AskHumanConfig(enabled=False),
                               tools=tuple(TOOLS.validate_python([
                                   stdio(include=["scale", "status"]),
                                   stdio(include=["scale"], prefix=None)]))))
    assert str(caught.value) == (
        "agent 'ops': tools.1: agents.ops.tools.1 (MCP server "
        f"{' '.join(STDIO_COMMAND[:3])}) and agents.ops.tools.0 (MCP server "
        f"{' '.join(STDIO_COMMAND[:3])}) both give the model a tool called 'scale'; {FIX}")


async def test_with_a_prefix_each_both_servers_tools_are_callable(
    agent: Any, journal: Path
) -> None:
    runtime, script, seen = agent([stdio(prefix="blue", include=["scale", "status"],
                                         approval="never"),
                                   stdio(prefix="green", include=["scale"], approval="never")])
    script.steps = ([("blue__scale", {"service": "api", "replicas": 2}),
                     ("green__scale", {"service": "web", "replicas": 3})],)
    outcome = await runtime.run("x")
    assert sorted(t.name for t in seen) == ["blue__scale", "blue__status", "green__scale"]
    assert outcome.output == ("blue__scale success: api now runs 2 replica(s)\n"
                              "green__scale success: web now runs 3 replica(s)")
    lines = [line.split(" pid=")[0] for line in journal_lines(journal)]
    assert sorted(lines) == ["scale api 2", "scale web 3"]
    assert len(set(pids(journal))) == 2  # each call reached its own server


async def test_a_prefixed_tool_asks_for_approval_under_its_prefixed_name_and_resumes(
    agent: Any, journal: Path
) -> None:
    runtime, script, _ = agent([stdio(prefix="blue", include=["scale"],
                                      approval={"when": "args.replicas > 3"}),
                                stdio(prefix="green", include=["scale"])])
    script.steps = ([("blue__scale", {"service": "api", "replicas": 8})],)
    asked = await runtime.run("x")
    (item,) = asked.approvals
    assert item.tool == "blue__scale"
    assert item.description == "Scale a service to a number of replicas."
    done = await runtime.resume(asked.snapshot, {item.tool_call_id: APPROVED},
                                tickets={item.tool_call_id: ApprovalTicket(item.binding, 1)})
    assert done.output == "blue__scale success: api now runs 8 replica(s)"


async def test_an_mcp_tool_named_like_a_python_tool_is_refused_with_both_fixes(
    agent: Any, journal: Path
) -> None:
    runtime, script, _ = agent([{"python": "tests.tools.sample_tools:scale"},
                                stdio(exclude=["crash"])])
    script.steps = ([("scale", {"service": "api", "replicas": 2})],)
    with pytest.raises(AgentRuntimeError) as caught:
        await runtime.run("x")
    message = str(caught.value)
    assert "agents.ops.tools.1 (MCP server" in message
    assert "agents.ops.tools.0 (Python tool tests.tools.sample_tools:scale)" in message
    assert ("set `prefix: <name>` on the MCP server at agents.ops.tools.1 or `name:` on the "
            "Python tool") in message


async def test_an_mcp_tool_named_like_the_ask_human_tool_is_refused(
    agent: Any, journal: Path
) -> None:
    runtime, script, _ = agent([stdio(exclude=["crash"])],
                               AskHumanConfig(tool_name="whoami"))
    script.steps = ([("status", {"service": "api"})],)
    with pytest.raises(AgentRuntimeError, match=(
            r"agents\.ops\.tools\.0 \(MCP server .*\) and agents\.ops\.ask_human \(the whoami "
            r"tool\) both give the model a tool called 'whoami'; set `prefix: <name>` on the "
            r"MCP server at agents\.ops\.tools\.0")):
        await runtime.run("x")


# ---------------------------------------------------------------- fixed arguments


async def test_fixed_arguments_are_hidden_and_reach_the_server(
    agent: Any, journal: Path
) -> None:
    runtime, script, seen = agent([stdio(include=["scale"], approval="never",
                                         fixed={"scale": {"service": "payments"}})])
    script.steps = ([("scale", {"replicas": 2})],)
    outcome = await runtime.run("x")
    (tool,) = seen
    assert set(tool.parameters_json_schema["properties"]) == {"replicas"}
    assert tool.parameters_json_schema["required"] == ["replicas"]
    assert outcome.output == "scale success: payments now runs 2 replica(s)"
    assert [line.split(" pid=")[0] for line in journal_lines(journal)] == ["scale payments 2"]


async def test_the_model_cannot_override_a_fixed_argument(agent: Any, journal: Path) -> None:
    runtime, script, _ = agent([stdio(include=["scale"], approval="never",
                                      fixed={"scale": {"service": "payments"}})])
    script.steps = ([("scale", {"service": "db", "replicas": 2})],)
    outcome = await runtime.run("x")
    assert str(outcome.output).startswith(
        "scale retried: service of scale is set by the admin; call it without that argument")
    assert journal_lines(journal) == []


async def test_the_approval_shows_and_binds_the_fixed_arguments(
    agent: Any, journal: Path
) -> None:
    entry = stdio(prefix="blue", include=["scale"], approval={"when": "args.replicas > 3"},
                  fixed={"scale": {"service": "payments"}})
    runtime, script, _ = agent([entry])
    script.steps = ([("blue__scale", {"replicas": 8})],)
    asked = await runtime.run("x")
    (item,) = asked.approvals
    assert item.args == {"replicas": 8} and item.fixed == {"service": "payments"}
    assert item.binding == binding_hash("blue__scale", {"replicas": 8},
                                        {"service": "payments"})
    assert item.binding != binding_hash("blue__scale", {"replicas": 8}, {})

    # The admin changes the fixed value while the card is open: the approval no longer
    # covers the call, and nothing runs.
    changed = {**entry, "fixed": {"scale": {"service": "ledger"}}}
    other, _, _ = agent([changed])
    with pytest.raises(ToolBindingError):
        await other.resume(asked.snapshot, {item.tool_call_id: APPROVED},
                           tickets={item.tool_call_id: ApprovalTicket(item.binding, 1)})
    assert journal_lines(journal) == []

    done = await runtime.resume(asked.snapshot, {item.tool_call_id: APPROVED},
                                tickets={item.tool_call_id: ApprovalTicket(item.binding, 1)})
    assert done.output == "blue__scale success: payments now runs 8 replica(s)"


async def test_a_fixed_key_the_tool_does_not_take_stops_the_run_naming_the_key(
    agent: Any, journal: Path
) -> None:
    runtime, script, _ = agent([stdio(include=["scale"], approval="never",
                                      fixed={"scale": {"cluster": "prod-eu"}})])
    script.steps = ([("scale", {"service": "api", "replicas": 2})],)
    with pytest.raises(AgentRuntimeError, match=(
            r"agents\.ops\.tools\.0\.fixed\.scale\.cluster: the tool has no parameter "
            r"'cluster'; its parameters are: service, replicas")):
        await runtime.run("x")


async def test_a_fixed_value_the_schema_refuses_stops_the_run(agent: Any, journal: Path) -> None:
    runtime, script, _ = agent([stdio(include=["scale"], approval="never",
                                      fixed={"scale": {"replicas": "lots"}})])
    script.steps = ([("scale", {"service": "api"})],)
    with pytest.raises(AgentRuntimeError, match=(
            r"agents\.ops\.tools\.0\.fixed\.scale\.replicas: value 'lots' does not fit")):
        await runtime.run("x")


def test_fixed_for_a_tool_the_entry_does_not_expose_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="fixed: status is not exposed by include/exclude"):
        TOOLS.validate_python([stdio(include=["scale"], fixed={"status": {"service": "x"}})])


def test_a_prefix_must_be_an_identifier() -> None:
    with pytest.raises(ValueError, match=r"prefix\n.*must be an identifier"):
        TOOLS.validate_python([stdio(prefix="blue team")])
