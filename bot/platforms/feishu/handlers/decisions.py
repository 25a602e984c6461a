"""Deciding a stored click, after the burst of answers, and telling the clicker.

The engine decides from the stored click (``decide_click``: message → ref check,
authorization, values, compare-and-set), the outbox patches the card for everyone,
and a clicker whose answer was not taken (refused, late, unauthorized, a vote short
of the quorum) is told privately, in their chat with the bot.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable

from bot.engine.clicks import DEFERRED
from bot.engine.inbox import Recorded
from bot.platforms.feishu.adapter import FeishuAdapter
from bot.platforms.feishu.engine_api import EngineApi
from bot.platforms.feishu.names import NameCache
from renderers.words import Said

log = logging.getLogger("askhuman.feishu.events")

ANSWERS_FIRST_QUIET = 0.02
"""Decisions start once no click has arrived for this long (seconds)..."""
ANSWERS_FIRST_PATIENCE = 1.0
"""...or after this long at the latest."""
DECIDING = 4
"""Stored clicks decided at a time by one process (the rest wait their turn)."""


class AnswersFirst:
    """Clicks being stored and answered right now: they have a 3 s deadline and
    decisions have none, so decisions wait for them (``wait``)."""

    def __init__(self) -> None:
        self._answering = 0
        self._last_arrival = 0.0

    def arrived(self) -> None:
        """A click is being stored (call ``answered`` once it has its toast)."""
        self._answering += 1
        self._last_arrival = time.monotonic()

    def answered(self) -> None:
        self._answering -= 1

    async def wait(self) -> None:
        """Wait while clicks are still being stored and answered (they have a 3 s
        deadline; decisions have none), at most ``ANSWERS_FIRST_PATIENCE`` seconds."""
        give_up = time.monotonic() + ANSWERS_FIRST_PATIENCE
        while time.monotonic() < give_up and (
                self._answering or time.monotonic() - self._last_arrival < ANSWERS_FIRST_QUIET):
            await asyncio.sleep(ANSWERS_FIRST_QUIET)


class ClickDecider:
    """Decides stored clicks, ``DECIDING`` at a time, and tells refused clickers."""

    def __init__(
        self,
        engine: EngineApi,
        adapter: FeishuAdapter,
        answers: AnswersFirst,
        humanize: Callable[[Said], Awaitable[Said]],
        names: NameCache | None = None,
    ) -> None:
        self._engine = engine
        self._adapter = adapter
        self._answers = answers
        self._humanize = humanize
        self._names = names
        self._deciding = asyncio.Semaphore(DECIDING)
        self._telling = asyncio.Semaphore(DECIDING)

    async def decide_later(self, recorded: Recorded) -> None:
        """Decide a stored click once the burst of answers is over, then tell the
        clicker privately unless the card says it all (their answer was taken). If
        deciding fails, the engine hands the click to its worker, which tells them."""
        await self._answers.wait()
        recorded = await self._named(recorded)
        async with self._deciding:
            result = await self._engine.decide_click(recorded)
        click = recorded.click
        log.info("feishu click decided", extra={
            "ref": click.ref[:64], "operator": click.responder.user_id,
            "outcome": result.outcome})
        if result.outcome == "accepted" or result.words == DEFERRED:
            return
        try:
            words = await self._humanize(result.words)
            async with self._telling:
                await self._adapter.tell_clicker(
                    click.responder, {**click.reply_to, "click": str(recorded.mark.id)}, words)
        except Exception:
            log.exception("could not tell a feishu clicker the outcome",
                          extra={"ref": click.ref[:64], "outcome": result.outcome})

    async def _named(self, recorded: Recorded) -> Recorded:
        """The click with the clicker's name (contact API, cached, at most 0.5 s), so
        progress lines and results say "Alice (Approve)", not an open_id. A click
        recovered by the worker after a crash goes without; the card then shows the id."""
        who = recorded.click.responder
        if self._names is None or who.display_name:
            return recorded
        try:
            name = await self._names.name(who.user_id, timeout=0.5)
        except Exception:  # a name is nice to have; deciding must not wait on it
            log.warning("feishu name lookup failed", extra={"operator": who.user_id})
            return recorded
        if not name:
            return recorded
        click = dataclasses.replace(recorded.click,
                                    responder=dataclasses.replace(who, display_name=name))
        return dataclasses.replace(recorded, click=click)
