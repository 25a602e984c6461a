"""Revoke clicks on the standing-grants card (callback value ``{"g": id, "l": locale}``).

Checked like any click first (this process's dedupe and the replay window, then the
shared dedupe of the event and, over HTTP, the nonce the endpoint left for the click
to record). Then the engine revokes (``revoke_grant``: only people who may answer the
grant's route; a grant already revoked or expired says so) within the reply budget,
and the toast says what happened, in the card's language: success, "already
revoked", or an error toast with the reason. The list card is then patched for the
clicker with a fresh list (the outcome on top), after the toast has gone out, since
Feishu rolls back a card edited before the click's reply. A refused click leaves the
card as it is (the toast says why): the clicker may not be its owner; so does a
failure (the toast asks to try again).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from lark_oapi.event.callback.model.p2_card_action_trigger import (
    P2CardActionTrigger,
    P2CardActionTriggerResponse,
)

from bot.engine.health import DATABASE_DOWN, database_unreachable
from bot.engine.ports import Identity
from bot.platforms.feishu.adapter import FeishuAdapter
from bot.platforms.feishu.engine_api import EngineApi
from bot.platforms.feishu.grants import GrantLists
from bot.platforms.feishu.handlers.audit import Auditor
from bot.platforms.feishu.handlers.dedupe import SharedDedupe
from bot.platforms.feishu.handlers.loop import MainLoop
from bot.platforms.feishu.handlers.toasts import RECEIVED, toast
from bot.platforms.feishu.replay import ReplayGuard, parse_epoch
from bot.platforms.feishu.reply_context import current_reply, shared_verdict
from renderers.feishu_grants import parse_grant_value
from renderers.words import Said, said

log = logging.getLogger("askhuman.feishu.events")

PLATFORM = "feishu"
_KINDS = {"accepted": "success", "already_decided": "info"}
"""Toast kind per revoke outcome; anything else (refused, not found) is an error."""
_CHANGED_LIST = frozenset({"accepted", "already_decided", "not_found"})
"""Outcomes after which the clicker's list is not what the card shows: patch it. A
refusal (maybe not their card) or a failure (told in the toast) leaves it."""


def hold_key(click: GrantClick) -> str:
    """What the list card's patch is held under until the toast has been sent."""
    return f"grants:{click.message_id}"


@dataclass(frozen=True)
class GrantClick:
    """A Revoke click that passed the checks: who, which grant, where, in which language."""

    grant_id: int
    locale: str
    who: Identity
    message_id: str
    event_id: str


class GrantClicks:
    """Answers Revoke clicks with a true toast, then patches the list card."""

    def __init__(self, engine: EngineApi, adapter: FeishuAdapter, lists: GrantLists,
                 guard: ReplayGuard, dedupe: SharedDedupe, auditor: Auditor,
                 loop: MainLoop) -> None:
        self._engine = engine
        self._adapter = adapter
        self._lists = lists
        self._guard = guard
        self._dedupe = dedupe
        self._auditor = auditor
        self._loop = loop

    @staticmethod
    def claims(data: P2CardActionTrigger) -> bool:
        """Whether ``data`` is a Revoke click (else it is a request card's)."""
        action = getattr(getattr(data, "event", None), "action", None)
        return parse_grant_value(getattr(action, "value", None)) is not None

    def check(self, data: P2CardActionTrigger) -> GrantClick | P2CardActionTriggerResponse:
        """The checks needing no database (as ``ClickAdmission``): a reply, or the click."""
        header, event = data.header, data.event
        event_id = getattr(header, "event_id", None) or ""
        action = getattr(event, "action", None)
        parsed = parse_grant_value(getattr(action, "value", None))
        operator = getattr(getattr(event, "operator", None), "open_id", None)
        who = Identity(PLATFORM, operator) if operator else None
        locale = parsed[1] if parsed else None
        if not self._guard.first_event(event_id):
            self._auditor.audit_later(None, who, "Duplicate Feishu callback (already "
                                      "handled).", check="duplicate_event",
                                      event_id=event_id[:200])
            return P2CardActionTriggerResponse({})
        created = parse_epoch(getattr(header, "create_time", None))
        if created is None or not self._guard.fresh(created):
            self._auditor.audit_later(None, who, "Feishu callback outside the replay "
                                      "window.", check="stale_event", event_id=event_id[:200])
            return toast("error", said("click.too_old"), locale)
        message_id = getattr(getattr(event, "context", None), "open_message_id", None)
        if parsed is None or who is None:
            return toast("error", said("button.invalid"), locale)
        return GrantClick(parsed[0], parsed[1], who, str(message_id or ""), event_id)

    async def answer(self, click: GrantClick, deadline: float) -> P2CardActionTriggerResponse:
        """On the main loop: dedupe across replicas, revoke within ``deadline``
        (``time.monotonic``), toast; the card patch follows the toast."""
        if not await self._first(click):
            return P2CardActionTriggerResponse({})
        key = hold_key(click)
        self._adapter.hold(key)  # released once the toast has been sent
        ctx = current_reply.get()
        if ctx is not None:
            ctx.held_refs.append(key)
        revoking = asyncio.ensure_future(self._revoke(click))
        self._loop.track(revoking)
        await asyncio.wait({revoking}, timeout=max(deadline - time.monotonic(), 0.05))
        if not revoking.done():  # still running: the card will say what happened
            revoking.add_done_callback(lambda done: self._patch_after(click, key, done))
            return toast("info", RECEIVED, click.locale)
        outcome, words = revoking.result()
        if outcome in _CHANGED_LIST:
            self._patch_after(click, key, revoking)
        log.info("feishu grant revoke answered", extra={
            "grant": click.grant_id, "operator": click.who.user_id, "outcome": outcome})
        return toast(_KINDS.get(outcome, "error"), words, click.locale)

    async def _first(self, click: GrantClick) -> bool:
        """Whether no replica handled this callback before (fails open)."""
        ctx = current_reply.get()
        deferred = ctx.deferred_seen if ctx is not None else ()
        if deferred:  # over HTTP: the nonce and event id the endpoint left to us
            verdicts = await self._dedupe.first_seen_chain(deferred)
            if not verdicts[0] and ctx is not None:
                ctx.replayed = True  # the endpoint refuses it like any replayed nonce
            return all(verdicts)
        shared = shared_verdict(click.event_id)
        if shared is None and click.event_id:
            shared = await self._dedupe.first_seen(f"event:{click.event_id}")
        return shared is not False

    async def _revoke(self, click: GrantClick) -> tuple[str, Said]:
        """The engine's outcome and words for the clicker."""
        try:
            result = await self._engine.revoke_grant(click.grant_id, click.who)
        except Exception as exc:
            down = database_unreachable(exc)
            log.warning("revoking a grant failed", exc_info=not down, extra={
                "platform": PLATFORM, "grant": click.grant_id, "error": type(exc).__name__})
            return "failed", DATABASE_DOWN if down else said("click.failed")
        return result.outcome, result.words

    def _patch_after(self, click: GrantClick, key: str,
                     revoking: asyncio.Future[tuple[str, Said]]) -> None:
        """Patch the list card once the toast has gone out (``key``'s hold released)."""
        if not click.message_id or revoking.cancelled():
            return
        _, words = revoking.result()

        async def patch() -> None:
            await self._adapter.replied(key)
            await self._lists.patch(click.message_id, click.who, click.locale,
                                    words.text(click.locale))

        self._loop.track(asyncio.ensure_future(patch()))
