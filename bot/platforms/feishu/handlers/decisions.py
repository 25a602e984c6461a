"""Deciding a stored click, inline within a short budget or after the burst of
answers, and telling the clicker what the toast could not.

The engine decides from the stored click (``decide_click``: message → ref check,
authorization, values, compare-and-set), the outbox patches the card for everyone.
A click decided within ``INLINE_SECONDS`` of its arrival gets the outcome as its
toast; otherwise the toast says "received" (still pending) and a clicker whose answer
was then not taken (refused, late, a vote short of the quorum or losing a race) is
told where they clicked, only them (``FeishuAdapter.tell_clicker``: an ephemeral
card, or their chat with the bot). The row stays ``telling`` until they were told, so
a failed message is retried by the engine's worker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable

from bot.engine.clicks import DEFERRED
from bot.engine.inbox import Recorded
from bot.engine.results import RespondResult
from bot.platforms.feishu.adapter import FeishuAdapter
from bot.platforms.feishu.engine_api import EngineApi
from bot.platforms.feishu.handlers.loop import MainLoop
from bot.platforms.feishu.names import NameCache
from renderers.words import Said

log = logging.getLogger("askhuman.feishu.events")

ANSWERS_FIRST_QUIET = 0.02
"""Decisions start once no click has arrived for this long (seconds)..."""
ANSWERS_FIRST_PATIENCE = 1.0
"""...or after this long at the latest."""
DECIDING = 4
"""Stored clicks decided at a time by one process (the rest wait their turn)."""
INLINE = 4
"""Clicks decided inline (before their toast) at a time; a click finding none free,
or arriving while others are being answered (a burst), is answered "received" and
decided after the burst, so a burst's toasts never queue behind its decisions."""
NAME_INLINE_SECONDS = 0.1
"""How long an inline decision waits for the clicker's name (looked up since the click
arrived, ``prefetch_name``); the card shows the open_id without it."""
INLINE_SECONDS = 0.15
"""How long after its arrival a click may wait for its decision before the toast says
"received" instead (the decision goes on; the outcome is told later if needed)."""


class AnswersFirst:
    """Clicks being stored and answered right now: they have a 3 s deadline and
    decisions have none, so decisions wait for them (``wait``).

    In a burst every click's decision waits here. One task polls for the quiet (every
    ``ANSWERS_FIRST_QUIET`` seconds) and wakes them all at once; when each waiter
    polled for itself, 100 waiters woke ~7 times each during a 150 ms burst, on the
    loop that was answering the burst."""

    def __init__(self) -> None:
        self._answering = 0
        self._last_arrival = 0.0
        self._quiet: asyncio.Future[None] | None = None
        self._watcher: asyncio.Future[None] | None = None

    def arrived(self) -> None:
        """A click is being stored (call ``answered`` once it has its toast)."""
        self._answering += 1
        self._last_arrival = time.monotonic()

    def answered(self) -> None:
        self._answering -= 1

    def burst(self) -> bool:
        """Whether other clicks are being answered right now (a burst: their toasts
        must not queue behind this one's decision)."""
        return self._answering > 1

    def _busy(self) -> bool:
        return bool(self._answering) or (
            time.monotonic() - self._last_arrival < ANSWERS_FIRST_QUIET)

    async def wait(self) -> None:
        """Wait while clicks are still being stored and answered (they have a 3 s
        deadline; decisions have none), at most ``ANSWERS_FIRST_PATIENCE`` seconds."""
        give_up = time.monotonic() + ANSWERS_FIRST_PATIENCE
        while self._busy():
            left = give_up - time.monotonic()
            if left <= 0:
                return
            await asyncio.wait([self._quiet_future()], timeout=left)

    def _quiet_future(self) -> asyncio.Future[None]:
        """Settled by the one poller (``_watch``) once the answering is over."""
        loop = asyncio.get_running_loop()
        quiet = self._quiet
        if quiet is None or quiet.done() or quiet.get_loop() is not loop:
            quiet = self._quiet = loop.create_future()
            self._watcher = asyncio.ensure_future(self._watch(quiet))
        return quiet

    async def _watch(self, quiet: asyncio.Future[None]) -> None:
        """Poll until no click is being answered (at most ``ANSWERS_FIRST_PATIENCE``;
        each waiter then checks again), then wake every waiter."""
        give_up = time.monotonic() + ANSWERS_FIRST_PATIENCE
        try:
            while self._busy() and time.monotonic() < give_up:
                await asyncio.sleep(ANSWERS_FIRST_QUIET)
        finally:
            if not quiet.done():
                quiet.set_result(None)


class ClickDecider:
    """Decides stored clicks (inline when there is time, else after the burst) and
    tells clickers what their toast did not."""

    def __init__(
        self,
        engine: EngineApi,
        adapter: FeishuAdapter,
        answers: AnswersFirst,
        humanize: Callable[[Said], Awaitable[Said]],
        loop: MainLoop,
        names: NameCache | None = None,
    ) -> None:
        self._engine = engine
        self._adapter = adapter
        self._answers = answers
        self._humanize = humanize
        self._loop = loop
        self._names = names
        self._deciding = asyncio.Semaphore(DECIDING)
        self._telling = asyncio.Semaphore(DECIDING)
        self.inline_free = INLINE
        """Inline slots free now (0: every click is answered "received" and decided
        after the burst)."""

    async def decide_now(self, recorded: Recorded, until: float) -> RespondResult | None:
        """Decide ``recorded`` before its toast if an inline slot is free and it is done
        by ``until`` (``time.monotonic``): its outcome, which the toast tells (the row
        is then closed as told). None: still pending; the toast says "received", the
        decision goes on and the clicker is told later if their answer was not taken."""
        if self.inline_free <= 0 or self._answers.burst() or until - time.monotonic() <= 0:
            self._loop.track(asyncio.ensure_future(self.decide_later(recorded)))
            return None
        self.inline_free -= 1
        task = asyncio.ensure_future(self._decide(recorded, inline=True))
        task.add_done_callback(self._slot_back)
        try:
            result = await asyncio.wait_for(asyncio.shield(task),
                                            max(until - time.monotonic(), 0.0))
        except TimeoutError:
            self._loop.track(asyncio.ensure_future(self._tell_when_decided(recorded, task)))
            return None
        self._loop.track(asyncio.ensure_future(self._settle(recorded, result, told=True)))
        return result

    def prefetch_name(self, recorded_by: str) -> None:
        """Start looking up the clicker's name as the click arrives, so an inline
        decision finds it cached (progress lines say "Alice (Approve)"); not in a
        burst, whose clicks are decided after it (and named then)."""
        if self._names is not None and not self._answers.burst():
            self._loop.track(asyncio.ensure_future(self._names.name(recorded_by)))

    def _slot_back(self, _task: asyncio.Future[RespondResult]) -> None:
        self.inline_free += 1

    async def decide_later(self, recorded: Recorded) -> None:
        """Decide a stored click once the burst of answers is over, then tell the
        clicker unless the card says it all (their answer was taken). If deciding
        fails, the engine hands the click to its worker, which tells them."""
        await self._answers.wait()
        async with self._deciding:
            result = await self._decide(recorded, inline=False)
        await self._settle(recorded, result, told=False)

    async def _tell_when_decided(self, recorded: Recorded,
                                 task: asyncio.Future[RespondResult]) -> None:
        await self._settle(recorded, await task, told=False)

    async def _decide(self, recorded: Recorded, *, inline: bool) -> RespondResult:
        recorded = await self._named(recorded, NAME_INLINE_SECONDS if inline else 0.5)
        result = await self._engine.decide_click(recorded, tell_later=True)
        click = recorded.click
        log.info("feishu click decided", extra={
            "ref": click.ref[:64], "operator": click.responder.user_id,
            "outcome": result.outcome})
        return result

    async def _settle(self, recorded: Recorded, result: RespondResult, *, told: bool) -> None:
        """After a ``tell_later`` decision: an accepted answer is on the card for all,
        and a deferred one is the worker's; anything else is told to the clicker here
        (unless the toast ``told`` it), and the row closed; a failed message goes to
        the worker."""
        if result.outcome == "accepted" or result.words == DEFERRED:
            return
        click = recorded.click
        try:
            if not told:
                words = await self._humanize(result.words)
                async with self._telling:
                    await self._adapter.tell_clicker(
                        click.responder, {**click.reply_to, "click": str(recorded.mark.id)},
                        words)
            await self._engine.told_clicker(recorded)
        except Exception as exc:
            log.warning("could not tell a feishu clicker the outcome; the worker retries",
                        extra={"ref": click.ref[:64], "outcome": result.outcome,
                               "error": str(exc)[:300]})
            try:
                await self._engine.tell_failed(recorded, exc)
            except Exception:
                log.exception("could not hand the telling to the worker; its lease will "
                              "run out", extra={"ref": click.ref[:64]})

    async def _named(self, recorded: Recorded, timeout: float) -> Recorded:
        """The click with the clicker's name (contact API, cached, at most ``timeout``),
        so progress lines and results say "Alice (Approve)",
        not an open_id. A click recovered by the worker after a crash goes without; the
        card then shows the id."""
        who = recorded.click.responder
        if self._names is None or who.display_name:
            return recorded
        try:
            name = await self._names.name(who.user_id, timeout=timeout)
        except Exception:  # a name is nice to have; deciding must not wait on it
            log.warning("feishu name lookup failed", extra={"operator": who.user_id})
            return recorded
        if not name:
            return recorded
        click = dataclasses.replace(recorded.click,
                                    responder=dataclasses.replace(who, display_name=name))
        return dataclasses.replace(recorded, click=click)
