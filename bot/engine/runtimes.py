"""Agent runtimes per configured agent: built on first use, kept, closed at shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from bot.agents.base import AgentRuntime
from bot.logs import scrub
from bot.settings import Settings

log = logging.getLogger("askhuman.engine")

RuntimeFactory = Callable[[str], AgentRuntime]
"""Build (or look up) the runtime for a configured agent name."""


def registry_runtimes(settings: Settings) -> RuntimeFactory:
    """The default factory: ``bot.agents.build_runtime`` on each configured agent."""

    def build(name: str) -> AgentRuntime:
        from bot.agents import AgentSpec, build_runtime

        agent = settings.agents[name]
        spec = AgentSpec(
            name=name,
            model=agent.model,
            instructions=agent.instructions,
            ask_human=agent.ask_human,
            tools=tuple(agent.tools),
        )
        runtime: AgentRuntime = build_runtime(spec)
        return runtime

    return build


class Runtimes:
    """The agent runtimes of this process, one per agent name."""

    def __init__(self, factory: RuntimeFactory, from_registry: bool) -> None:
        self._factory = factory
        self._from_registry = from_registry
        self.built: dict[str, AgentRuntime] = {}
        """Runtimes built so far by agent name (tests and benchmarks may wrap one)."""

    def get(self, agent: str) -> AgentRuntime:
        """Runtimes are built on first use and kept, so each agent is set up once."""
        if agent not in self.built:
            self.built[agent] = self._factory(agent)
        return self.built[agent]

    async def ready(self, agent: str) -> AgentRuntime:
        """``get``, with a first build on a worker thread: it imports the agent stack
        (pydantic-ai, seconds on a busy machine), which on the event loop would stall
        every other task of the process, its heartbeat too (then it is presumed dead
        and its rows are taken over: a card updated twice)."""
        if agent not in self.built:
            built = await asyncio.to_thread(self._factory, agent)
            self.built.setdefault(agent, built)  # a concurrent first build: keep one
        return self.built[agent]

    async def warm(self, agents: list[str]) -> None:
        """Build ``agents`` now, one after another on a worker thread (``ready``), so
        the first resume after a start does not wait for the agent stack's import
        (``askhuman worker``, which exists to run them). One that cannot be built is
        logged and fails again, with its error, where it is used."""
        for agent in agents:
            try:
                await self.ready(agent)
            except Exception as exc:
                log.warning("an agent could not be built ahead of its first use",
                            extra={"agent": agent, "error": scrub(str(exc))})

    def apply_settings(self, settings: Settings) -> None:
        """Agents a reload added are built from the new config on first use; runtimes
        already built keep their definition until a restart."""
        if self._from_registry:
            self._factory = registry_runtimes(settings)

    async def close(self) -> None:
        """Close what agent runtimes keep open (MCP sessions and subprocesses): shutdown."""
        for name, runtime in list(self.built.items()):
            close = getattr(runtime, "aclose", None)
            if close is None:
                continue
            try:
                await close()
            except Exception:
                log.warning("closing an agent runtime failed", exc_info=True,
                            extra={"agent": name})
