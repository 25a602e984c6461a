"""Who may start an agent (its ``starters``), checked and audited before anything runs.

Adapters ask before any visible work (a thread root, a "started" message); the run
starter asks again. An unknown agent's message lists only the agents the person may
start, so nobody learns about agents they cannot use.
"""

from __future__ import annotations

from bot.engine import authz, store
from bot.engine.committer import Committer, log
from bot.engine.context import EngineContext
from bot.engine.platforms import Platforms
from bot.engine.ports import Identity
from bot.engine.results import StartRefusedError, UnknownAgentError
from renderers.words import Said, said


class Starters:
    """``refusal`` / ``require`` / ``startable``: the ``starters`` rule of agents."""

    def __init__(self, ctx: EngineContext, committer: Committer, platforms: Platforms) -> None:
        self._ctx = ctx
        self._committer = committer
        self._platforms = platforms

    async def _verdict(self, agent: str, who: Identity) -> Said | None:
        settings = self._ctx.settings.agent(agent)
        if settings is None:
            return await self._unknown_agent_message(agent, who)
        route = self._ctx.settings.routes.get(settings.route)
        return await authz.start_refusal(agent, settings, route, who,
                                         self._platforms.directory(who.platform))

    async def _unknown_agent_message(self, agent: str, who: Identity) -> Said:
        mine = await self.startable(who)
        shown = agent[:64]
        if self._ctx.settings.retired_agent(agent):
            return said("start.retired_agents", agent=shown, agents=", ".join(mine)) if mine \
                else said("start.retired", agent=shown)
        if not mine:
            return said("start.unknown_none", agent=shown)
        return said("start.unknown", agent=shown, agents=", ".join(mine))

    async def startable(self, who: Identity) -> list[str]:
        """Names of the agents ``who`` may start (sorted); unverifiable ones are left out."""
        names = []
        for name, agent in sorted(self._ctx.settings.agents.items()):
            if self._ctx.settings.retired_agent(name):
                continue
            route = self._ctx.settings.routes.get(agent.route)
            if await authz.start_refusal(name, agent, route, who,
                                         self._platforms.directory(who.platform)) is None:
                names.append(name)
        return names

    async def refusal(self, agent: str, who: Identity) -> Said | None:
        """None when ``who`` may start ``agent`` (one of its ``starters``); otherwise the
        message to show them, after auditing the refusal (``run_start_refused``).

        An unknown agent's message lists only the agents ``who`` may start. Adapters call
        this before any visible work (a thread root, a "started" message); ``RunStarter.start``
        checks again.
        """
        reason = await self._verdict(agent, who)
        if reason is not None:
            known = self._ctx.settings.agent(agent) is not None
            now = self._ctx.now()
            details = {"agent": agent[:64], "check": "not_a_starter" if known
                       else "unknown_agent"}
            message = str(reason)  # audits and logs are for admins: English
            await self._committer.batched(lambda s: store.audit(
                s, now, "run_start_refused", outcome="refused", actor=who,
                reason=message[:2000], details=details))
            log.info("run start refused", extra={"agent": agent[:64], "user": who.user_id,
                                                 "reason": message[:500]})
        return reason

    async def require(self, agent: str, who: Identity) -> None:
        """Raise ``UnknownAgentError`` / ``StartRefusedError`` unless ``who`` may start."""
        reason = await self.refusal(agent, who)
        if reason is None:
            return
        if self._ctx.settings.agent(agent) is None:
            raise UnknownAgentError(reason)
        raise StartRefusedError(reason)
