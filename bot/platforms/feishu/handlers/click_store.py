"""Storing an admitted click in the engine's click inbox, before its toast.

Feishu never resends an acknowledged click, so the toast says "received" only once
the click is stored; deciding is queued for later (``ClickDecider.decide_later``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time

from bot.engine.clicks import NOT_RECORDED
from bot.engine.inbox import AlreadySeen, ClickTooLarge
from bot.platforms.feishu.engine_api import EngineApi
from bot.platforms.feishu.handlers.admission import Admitted
from bot.platforms.feishu.handlers.audit import Auditor
from bot.platforms.feishu.handlers.decisions import AnswersFirst, ClickDecider
from bot.platforms.feishu.handlers.dedupe import SharedDedupe
from bot.platforms.feishu.handlers.loop import MainLoop
from bot.platforms.feishu.handlers.toasts import received_text
from bot.platforms.feishu.reply_context import current_reply
from renderers.words import Said

log = logging.getLogger("askhuman.feishu.events")

DUPLICATE = "duplicate"
"""``ClickStore.store``'s verdict for a callback already handled (answered with ``{}``)."""


class Handoff:
    """Who got there first, the SDK thread that must reply or the coroutine storing the
    click: a click stored after its reply gave up (and asked to click again) is dropped,
    and a "received" toast is only sent for a click that is stored."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = "waiting"

    def stored(self) -> bool:
        """From the coroutine: the click is stored; False if the reply already gave up."""
        with self._lock:
            if self._state == "gave_up":
                return False
            self._state = "stored"
            return True

    def give_up(self) -> bool:
        """From the SDK thread, out of time: True if the click is stored by now."""
        with self._lock:
            if self._state == "stored":
                return True
            self._state = "gave_up"
            return False


class ClickStore:
    """Shared dedupe, then the click into the inbox; its decision queued on the loop."""

    def __init__(
        self,
        engine: EngineApi,
        dedupe: SharedDedupe,
        auditor: Auditor,
        answers: AnswersFirst,
        decisions: ClickDecider,
        loop: MainLoop,
    ) -> None:
        self._engine = engine
        self._dedupe = dedupe
        self._auditor = auditor
        self._answers = answers
        self._decisions = decisions
        self._loop = loop

    async def store(
        self, admitted: Admitted, deadline: float, handoff: Handoff | None
    ) -> tuple[str, Said | str]:
        """Shared dedupe, then store the click (by ``deadline``, ``time.monotonic``); the
        toast to send. Deciding is queued for later (``decide_later``). ``handoff``
        (long connection) says whether the SDK thread still waits for the answer."""
        self._answers.arrived()
        try:
            click, event_id = admitted.click, admitted.event_id
            shared_new = admitted.shared_new
            ctx = current_reply.get()
            deferred = ctx.deferred_seen if ctx is not None else ()
            if deferred:
                shared_new = True  # recorded with the click below, in one transaction
            if shared_new is None and event_id:
                shared_new = await self._dedupe.first_seen(f"event:{event_id}")
            if shared_new is False:
                # Another replica (or an earlier run of this one) already handled it.
                log.info("duplicate feishu callback ignored (shared)",
                         extra={"event_id": event_id})
                await self._auditor.audit(click.ref, click.responder, "Duplicate Feishu "
                                          "callback (already handled).",
                                          check="duplicate_event", event_id=event_id[:200])
                return DUPLICATE, ""
            try:
                recorded = await self._engine.record_click(
                    click, budget=deadline - time.monotonic(), seen=deferred)
            except AlreadySeen as seen:
                if seen.key.startswith("nonce:") and ctx is not None:
                    ctx.replayed = True  # the endpoint refuses it like any replayed nonce
                    return DUPLICATE, ""
                log.info("duplicate feishu callback ignored (shared)",
                         extra={"event_id": event_id})
                await self._auditor.audit(click.ref, click.responder, "Duplicate Feishu "
                                          "callback (already handled).",
                                          check="duplicate_event", event_id=event_id[:200])
                return DUPLICATE, ""
            except ClickTooLarge as exc:
                await self._auditor.audit(click.ref, click.responder, str(exc),
                                          check="click_too_large")
                return "error", exc.words
            if recorded is None:
                return "error", NOT_RECORDED
            if handoff is not None and not handoff.stored():
                await self._engine.abandon_click(recorded)  # the clicker was asked to retry
                return "error", NOT_RECORDED
            self._loop.track(asyncio.ensure_future(self._decisions.decide_later(recorded)))
            return "info", received_text(click)
        finally:
            self._answers.answered()
