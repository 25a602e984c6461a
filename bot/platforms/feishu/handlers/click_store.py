"""Checking an admitted click, storing it in the engine's click inbox, and deciding
it, all before its toast, so the toast tells the truth.

A click the engine can refuse cheaply (``engine.check_click``: unknown or tampered
card, action or option, a closed request, not an approver by a fresh directory
cache, self-approval, a missing required field or reason) is answered with an error
toast saying why, audited, and not stored. Feishu never resends an acknowledged
click, so any other toast comes only once the click is stored; then the click is
decided inline within a short budget (``ClickDecider.decide_now``): the toast says
the outcome, or "received" while it is truly still pending.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Awaitable, Callable

from bot.engine.click_check import Checked
from bot.engine.clicks import NOT_RECORDED
from bot.engine.inbox import AlreadySeen, Click, ClickTooLarge
from bot.platforms.feishu.engine_api import EngineApi
from bot.platforms.feishu.handlers.admission import Admitted
from bot.platforms.feishu.handlers.audit import Auditor
from bot.platforms.feishu.handlers.decisions import INLINE_SECONDS, AnswersFirst, ClickDecider
from bot.platforms.feishu.handlers.dedupe import SharedDedupe
from bot.platforms.feishu.handlers.toasts import RECEIVED, toast_kind
from bot.platforms.feishu.reply_context import current_reply
from renderers.words import Said

Reply = tuple[str, Said | str, str | None]
"""A toast to send: (kind, words, the card's locale)."""

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
        humanize: Callable[[Said], Awaitable[Said]],
    ) -> None:
        self._engine = engine
        self._dedupe = dedupe
        self._auditor = auditor
        self._answers = answers
        self._decisions = decisions
        self._humanize = humanize

    async def store(
        self, admitted: Admitted, deadline: float, handoff: Handoff | None,
        started: float | None = None,
    ) -> Reply:
        """Shared dedupe, the pre-check, then store the click (by ``deadline``,
        ``time.monotonic``) and decide it within ``INLINE_SECONDS`` of ``started``: the
        toast to send. ``handoff`` (long connection) says whether the SDK thread still
        waits for the answer."""
        self._answers.arrived()
        try:
            return await self._store(admitted, deadline, handoff,
                                     time.monotonic() if started is None else started)
        finally:
            self._answers.answered()

    async def _store(self, admitted: Admitted, deadline: float, handoff: Handoff | None,
                     started: float) -> Reply:
        click, event_id = admitted.click, admitted.event_id
        locale = click.reply_to.get("locale")
        self._decisions.prefetch_name(click.responder.user_id)
        shared_new = admitted.shared_new
        ctx = current_reply.get()
        deferred = ctx.deferred_seen if ctx is not None else ()
        if deferred:
            shared_new = True  # recorded with the click (or its refusal) below
        if shared_new is None and event_id:
            shared_new = await self._dedupe.first_seen(f"event:{event_id}")
        if shared_new is False:
            # Another replica (or an earlier run of this one) already handled it.
            return await self._duplicate(click, event_id)
        try:
            checked = await self._check(click, deferred) if not self._answers.burst() \
                else Checked(None)  # a burst: its toasts first, every check after them
            if checked.refusal is not None:
                words = await self._humanize(checked.refusal.words)
                return "error", words, checked.locale or locale
            click = _where(click, checked)
            locale = click.reply_to.get("locale")
            recorded = await self._engine.record_click(
                click, budget=deadline - time.monotonic(), seen=deferred)
        except AlreadySeen as seen:
            if seen.key.startswith("nonce:") and ctx is not None:
                ctx.replayed = True  # the endpoint refuses it like any replayed nonce
                return DUPLICATE, "", None
            return await self._duplicate(click, event_id)
        except ClickTooLarge as exc:
            await self._auditor.audit(click.ref, click.responder, str(exc),
                                      check="click_too_large")
            return "error", exc.words, locale
        if recorded is None:
            return "error", NOT_RECORDED, locale
        if handoff is not None and not handoff.stored():
            await self._engine.abandon_click(recorded)  # the clicker was asked to retry
            return "error", NOT_RECORDED, locale
        until = min(started + INLINE_SECONDS, deadline)
        result = await self._decisions.decide_now(recorded, until)
        if result is None:
            return "info", RECEIVED, locale
        return toast_kind(result), await self._humanize(result.words), locale

    async def _check(self, click: Click, seen: tuple[str, ...]) -> Checked:
        """The engine's pre-check; if it fails, the click is stored and decided as
        usual (the decision checks everything again). Skipped while other clicks are
        being answered (a burst): there the toasts come first and say "received", the
        decision after the burst refuses what the check would have, and the clicker is
        told where they clicked (an ephemeral card)."""
        try:
            return await self._engine.check_click(click, seen)
        except AlreadySeen:
            raise
        except Exception:
            log.exception("feishu click pre-check failed; storing the click",
                          extra={"ref": click.ref[:64]})
            return Checked(None)

    async def _duplicate(self, click: Click, event_id: str) -> Reply:
        log.info("duplicate feishu callback ignored (shared)", extra={"event_id": event_id})
        await self._auditor.audit(click.ref, click.responder, "Duplicate Feishu "
                                  "callback (already handled).",
                                  check="duplicate_event", event_id=event_id[:200])
        return DUPLICATE, "", None


def _where(click: Click, checked: Checked) -> Click:
    """The click with what the pre-check learnt: the card's locale, and whether the
    card was sent to the clicker directly (no ephemeral card can go there)."""
    reply_to = dict(click.reply_to)
    if checked.locale:
        reply_to["locale"] = checked.locale
    if checked.direct is not None:
        reply_to["direct"] = "1" if checked.direct else "0"
    return dataclasses.replace(click, reply_to=reply_to)
