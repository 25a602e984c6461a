"""Child-process side of the tool crash tests (run as ``python -m``; not a test module).

Modes:
  before-tools DB_URL MARKER   run the worker; the resume writes MARKER and hangs before
                               any tool runs (a crash between approval and execution)
  mid-tool DB_URL MARKER       run the worker; the approved tool writes its side effect and
                               MARKER, then hangs (a crash in the middle of the tool call)
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from bot.agents import AgentSpec, LocalRuntime
from bot.agents.base import AgentRuntime, Outcome
from bot.askhuman.schema import AskHumanToolResult
from bot.engine import Engine
from bot.settings import FileSettings, Settings
from storage import Database
from tests.engine.helpers import FakeAdapter, FakeClock, FakeDirectory
from tests.tools.scripts import Scripted

LEASE_SECONDS = 30.0


def tool_settings(db_url: str, marker: str) -> Settings:
    parsed = FileSettings.model_validate({
        "agents": {"ops": {"model": "scripted:deploy", "route": "ops",
                           "starters": {"slack": {"users": ["U_STARTER"]}}, "tools": [
            {"python": "tests.tools.sample_tools:slow_write", "approval": "always"}]}},
        "routes": {"ops": {"timeout": "30m", "slack": {
            "channel": "C_OPS", "approvers": {"users": ["U_ALICE"]}}}},
    })
    return Settings(database_url=db_url, agents=parsed.agents, routes=parsed.routes)


def tool_runtime(settings: Settings, marker: str) -> LocalRuntime:
    agent = settings.agents["ops"]
    script = Scripted([("slow_write", {"marker": marker})])
    return LocalRuntime(AgentSpec(name="ops", model=agent.model, tools=tuple(agent.tools)),
                        model=script.model)


def tool_engine(db_url: str, marker: str, clock: FakeClock | None = None,
                runtime: AgentRuntime | None = None) -> tuple[Engine, FakeAdapter, FakeClock]:
    database = Database(db_url)
    database.upgrade()
    settings = tool_settings(db_url, marker)
    clock = clock or FakeClock()
    built = runtime or tool_runtime(settings, marker)
    engine = Engine(database, settings, lambda _name: built, clock,
                    lease_seconds=LEASE_SECONDS)
    adapter = FakeAdapter()
    engine.register_adapter(adapter, FakeDirectory())
    return engine, adapter, clock


class HangBeforeTools:
    """The real runtime, except that ``resume`` stops for good before anything runs."""

    def __init__(self, inner: LocalRuntime, marker: str) -> None:
        self.inner, self.name, self.marker = inner, inner.name, marker

    async def run(self, prompt: str, **kw: Any) -> Outcome:
        return await self.inner.run(prompt, **kw)

    async def resume(self, snapshot: dict[str, JsonValue],
                     results: dict[str, AskHumanToolResult], **kw: Any) -> Outcome:
        Path(self.marker).write_text("resuming, no tool has run")
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")


async def main(mode: str, db_url: str, marker: str) -> None:
    if mode == "before-tools":
        settings = tool_settings(db_url, marker)
        runtime = HangBeforeTools(tool_runtime(settings, marker), marker)
        engine, _, _ = tool_engine(db_url, marker, runtime=runtime)
    elif mode == "mid-tool":
        os.environ["TOOLS_HANG"] = "1"
        engine, _, _ = tool_engine(db_url, marker)
    else:
        raise SystemExit(f"unknown mode {mode}")
    await engine.run_worker_once()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
