"""MCP tools for real: the example server over stdio and Streamable HTTP (loopback),
include lists, approval defaults, environment names, restarts, timeouts, shutdown."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from bot.agents import AgentSpec, LocalRuntime
from bot.askhuman.config import AskHumanConfig
from bot.askhuman.schema import AskHumanSelectedAction, AskHumanToolResult
from bot.tools.approval import ApprovalTicket
from bot.tools.config import ToolSettings
from bot.tools.mcp import McpStartError
from tests.tools.mcp_server import (
    STDIO_COMMAND,
    alive,
    free_port,
    http_server,
    journal_lines,
    pids,
)
from tests.tools.scripts import Scripted

TOOLS = TypeAdapter(list[ToolSettings])
APPROVED = AskHumanToolResult(status="submitted",
                              action=AskHumanSelectedAction(id="approve", label="Approve"))


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "journal.txt"
    monkeypatch.setenv("OPS_JOURNAL", str(path))
    return path


@pytest.fixture
def http_url(journal: Path) -> Iterator[str]:
    with http_server(journal) as url:
        yield url


def stdio(**entry: Any) -> dict[str, Any]:
    return {"mcp": {"command": STDIO_COMMAND, "env": ["OPS_JOURNAL"]}, **entry}


@pytest.fixture
async def agent() -> AsyncIterator[Any]:
    made: list[LocalRuntime] = []

    def build(tools: list[dict[str, Any]]) -> tuple[LocalRuntime, Scripted, list[Any]]:
        seen: list[Any] = []
        script = Scripted(seen_tools=seen)
        spec = AgentSpec(name="ops", model="scripted:deploy",
                         ask_human=AskHumanConfig(enabled=False),
                         tools=tuple(TOOLS.validate_python(tools)))
        runtime = LocalRuntime(spec, model=script.model)
        made.append(runtime)
        return runtime, script, seen

    yield build
    for runtime in made:
        await runtime.aclose()


async def test_stdio_server_starts_lazily_lists_only_included_tools(
    agent: Any, journal: Path
) -> None:
    runtime, script, seen = agent([stdio(include=["scale", "status"], approval="never")])
    (server,) = runtime.tools.servers
    assert not server.running  # nothing spawned until a run needs the tools
    script.steps = ([("status", {"service": "api"})],)
    outcome = await runtime.run("status?")
    assert server.running
    assert sorted(t.name for t in seen) == ["scale", "status"]
    assert outcome.output == "status success: api: 1 replica(s)"


async def test_unlisted_mcp_tools_always_need_approval(agent: Any, journal: Path) -> None:
    runtime, script, seen = agent([stdio(exclude=["crash", "sleep"])])
    script.steps = ([("status", {"service": "api"}), ("scale", {"service": "api",
                                                                 "replicas": 1})],)
    outcome = await runtime.run("x")
    assert {"scale", "status", "whoami"} <= {t.name for t in seen}
    assert "crash" not in {t.name for t in seen}
    assert sorted(a.tool for a in outcome.approvals) == ["scale", "status"]
    scale = next(a for a in outcome.approvals if a.tool == "scale")
    assert scale.description == "Scale a service to a number of replicas."
    assert journal_lines(journal) == []


async def test_when_rule_on_mcp_tool_and_approved_call_runs_once(
    agent: Any, journal: Path
) -> None:
    runtime, script, _ = agent([stdio(include=["scale"],
                                      approval={"when": "args.replicas > 3"})])
    script.steps = ([("scale", {"service": "api", "replicas": 2})],)
    small = await runtime.run("x")
    assert small.output == "scale success: api now runs 2 replica(s)"
    script.steps = ([("scale", {"service": "api", "replicas": 8})],)
    big = await runtime.run("x")
    (item,) = big.approvals
    done = await runtime.resume(big.snapshot, {item.tool_call_id: APPROVED},
                                tickets={item.tool_call_id: ApprovalTicket(item.binding, 1)})
    assert done.output == "scale success: api now runs 8 replica(s)"
    lines = journal_lines(journal)
    assert [line.split(" pid=")[0] for line in lines] == ["scale api 2", "scale api 8"]
    assert len(set(pids(journal))) == 1  # one server process, reused across runs


async def test_env_values_come_from_the_environment_by_name(
    agent: Any, journal: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPS_TOKEN", "s3cret-value")
    entry = {"mcp": {"command": STDIO_COMMAND, "env": ["OPS_TOKEN"]}, "include": ["whoami"],
             "approval": "never"}
    runtime, script, _ = agent([entry])
    script.steps = ([("whoami", {})],)
    assert (await runtime.run("x")).output == "whoami success: token: set"


async def test_missing_env_variable_is_a_clear_error(agent: Any, journal: Path) -> None:
    entry = {"mcp": {"command": STDIO_COMMAND, "env": ["NOT_SET_ANYWHERE"]}}
    runtime, script, _ = agent([entry])
    script.steps = ([("whoami", {})],)
    with pytest.raises(McpStartError, match=r"needs the environment variable.* NOT_SET_ANYWHERE"):
        await runtime.run("x")


async def test_server_that_dies_mid_call_is_restarted_and_the_model_is_told(
    agent: Any, journal: Path
) -> None:
    runtime, script, _ = agent([stdio(include=["crash", "scale"], approval="never")])
    script.steps = ([("crash", {})],)
    crashed = await runtime.run("x")
    assert crashed.output == ("crash failed: The MCP server behind crash stopped during the "
                              "call and was restarted; whether the call took effect is unknown.")
    script.steps = ([("scale", {"service": "api", "replicas": 3})],)
    after = await runtime.run("x")
    assert after.output == "scale success: api now runs 3 replica(s)"
    assert runtime.tools.servers[0].restarts == 1


async def test_server_that_died_while_idle_is_restarted_before_the_next_call(
    agent: Any, journal: Path
) -> None:
    runtime, script, _ = agent([stdio(include=["scale"], approval="never")])
    script.steps = ([("scale", {"service": "api", "replicas": 1})],)
    await runtime.run("x")
    (first,) = pids(journal)
    os.kill(first, signal.SIGKILL)
    script.steps = ([("scale", {"service": "api", "replicas": 2})],)
    assert (await runtime.run("x")).output == "scale success: api now runs 2 replica(s)"
    second = pids(journal)[-1]
    assert second != first and runtime.tools.servers[0].restarts == 1


async def test_hung_mcp_call_times_out_and_the_server_keeps_working(
    agent: Any, journal: Path
) -> None:
    runtime, script, _ = agent([stdio(include=["sleep", "status"], approval="never",
                                      timeout=0.5)])
    script.steps = ([("sleep", {"seconds": 30})],)
    outcome = await runtime.run("x")
    assert outcome.output == ("sleep failed: sleep did not finish within 0.5s and was stopped; "
                              "whether it took effect is unknown.")
    script.steps = ([("status", {"service": "web"})],)
    assert (await runtime.run("x")).output == "status success: web: 1 replica(s)"


async def test_shutdown_closes_the_session_and_ends_the_subprocess(
    agent: Any, journal: Path
) -> None:
    runtime, script, _ = agent([stdio(include=["scale"], approval="never")])
    script.steps = ([("scale", {"service": "api", "replicas": 1})],)
    await runtime.run("x")
    (pid,) = pids(journal)
    assert alive(pid)
    await runtime.aclose()
    for _ in range(100):
        if not alive(pid):
            break
        import asyncio

        await asyncio.sleep(0.05)
    assert not alive(pid)
    assert not runtime.tools.servers[0].running


async def test_streamable_http_server_with_approval(
    agent: Any, journal: Path, http_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPS_MCP_AUTH", "Bearer test-token")
    entry = {"mcp": {"url": http_url, "headers_env": {"Authorization": "OPS_MCP_AUTH"}},
             "approval": "always"}
    runtime, script, _ = agent([entry])
    script.steps = ([("scale", {"service": "web", "replicas": 4})],)
    asked = await runtime.run("x")
    (item,) = asked.approvals
    assert item.args == {"service": "web", "replicas": 4} and item.tool == "scale"
    assert journal_lines(journal) == []
    done = await runtime.resume(asked.snapshot, {item.tool_call_id: APPROVED},
                                tickets={item.tool_call_id: ApprovalTicket(item.binding, 1)})
    assert done.output == "scale success: web now runs 4 replica(s)"
    assert [line.split(" pid=")[0] for line in journal_lines(journal)] == ["scale web 4"]


async def test_bad_mcp_arguments_are_a_retry_before_any_approval(
    agent: Any, journal: Path
) -> None:
    runtime, script, _ = agent([stdio(include=["scale"], approval="always")])
    script.steps = ([("scale", {"service": "api", "replicas": "lots"})],)
    outcome = await runtime.run("x")
    assert not outcome.approvals and outcome.kind == "output"
    text = str(outcome.output)
    assert text.startswith("scale retried: invalid arguments for scale:")
    assert "replicas: 'lots' is not of type 'integer'" in text
    assert journal_lines(journal) == []


async def test_unreachable_http_server_is_a_clear_error(agent: Any) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    runtime, script, _ = agent([{"mcp": {"url": url}}])
    script.steps = ([("status", {"service": "api"})],)
    with pytest.raises(McpStartError, match=f"cannot start MCP server {url}"):
        await runtime.run("x")
