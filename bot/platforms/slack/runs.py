"""Starting a run from Slack (slash command or mention): store it, then ack, then run it.

Slack never resends a slash command or an event it got its ack for, so ``admit`` checks
the starter (a refusal is answered at once and nothing is stored) and stores the start
in the engine's run-start inbox (``engine.record_start``) *before* the listener acks;
the run's first leg then runs from the stored row (``engine.run_start``). A crash right
after the ack loses nothing: the engine's worker runs the stored start. When the start
could not be stored in time the starter is told so, never "started".

The run's own output arrives later through ``SlackAdapter.post_run_result``; only a
start that did not happen is told here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from bot.engine.health import DATABASE_DOWN, database_unreachable
from bot.engine.ports import Identity, Origin
from bot.engine.run_starts import Started
from bot.engine.start_rows import Start, StoredStart
from bot.platforms.slack.engine_api import SlackEngine
from bot.platforms.slack.text import quote
from renderers.markdown import slack_escape
from renderers.words import Said, said

log = logging.getLogger(__name__)

ACK_BUDGET = 2.5
"""Seconds from the request's arrival until its ack must go (Slack allows 3)."""
REFUSAL_BUDGET = 1.0
"""Seconds the starter check may take before the ack; a slower (uncached) check is left
to the engine, which checks again before the run starts and says why if it refuses."""
MIN_STORE_BUDGET = 0.5


@dataclass(frozen=True)
class Admitted:
    """A start checked before the ack: stored (run it after the ack), or the words that
    tell the starter why not (refused, or not recorded)."""

    stored: StoredStart | None
    words: Said | None = None


def thread_root(user_id: str, agent: str, prompt: str) -> str:
    """The "started" message a slash command's run reports under (its thread root)."""
    return f"<@{user_id}> started *{slack_escape(agent)}*:\n{quote(prompt)}"


async def admit(engine: SlackEngine, agent: str, prompt: str, user: Identity,
                origin: Origin, arrived: float) -> Admitted:
    """Check the starter, then store the start, within the ack's budget (``arrived``:
    ``time.monotonic()`` when the request came in)."""
    try:
        async with asyncio.timeout(REFUSAL_BUDGET):
            refusal = await engine.start_refusal(agent, user)
        if refusal is not None:  # audited by the engine; nothing is stored
            return Admitted(None, refusal)
    except TimeoutError:
        log.info("starter check slower than its budget; the engine checks before running",
                 extra={"platform": "slack", "agent": agent[:64]})
    except Exception:
        log.warning("starter check failed before the ack; the engine checks again",
                    exc_info=True, extra={"platform": "slack", "agent": agent[:64]})
    budget = max(MIN_STORE_BUDGET, ACK_BUDGET - (time.monotonic() - arrived))
    try:
        stored = await engine.record_start(Start(agent, prompt, user, origin), budget)
    except Exception as exc:
        if not database_unreachable(exc):
            raise
        return Admitted(None, DATABASE_DOWN)
    if stored is None:
        return Admitted(None, said("start.not_recorded", agent=agent[:64]))
    return Admitted(stored)


async def run_admitted(engine: SlackEngine, stored: StoredStart) -> Started:
    """Run a start stored before the ack (after it); never raises."""
    try:
        started = await engine.run_start(stored)
    except Exception:  # run_start never raises; a stand-in engine might
        log.exception("running a stored start failed", extra={"platform": "slack"})
        return Started(None, said("run.failed_logs"))
    if started.run_id is not None:
        log.info("run started from slack", extra={
            "platform": "slack", "agent": stored.start.agent[:64], "run": started.run_id,
            "user": stored.start.started_by.user_id})
    return started
