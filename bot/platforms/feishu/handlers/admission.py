"""The checks a card click passes before anything else: those that need no database
(this process's dedupe, the replay window, the callback's shape). The engine's
pre-check (``engine.check_click``) comes next, then storing and deciding
(``click_store``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from lark_oapi.event.callback.model.p2_card_action_trigger import (
    P2CardActionTrigger,
    P2CardActionTriggerResponse,
)

from bot.engine.inbox import Click
from bot.engine.ports import Identity
from bot.platforms.feishu.adapter import FeishuAdapter
from bot.platforms.feishu.handlers.audit import Auditor
from bot.platforms.feishu.handlers.toasts import toast
from bot.platforms.feishu.replay import ReplayGuard, parse_epoch
from bot.platforms.feishu.reply_context import shared_verdict
from renderers.card import WITHDRAW_TOKEN
from renderers.feishu_values import parse_callback_value
from renderers.words import said

log = logging.getLogger("askhuman.feishu.events")

PLATFORM = "feishu"


@dataclass(frozen=True)
class Admitted:
    """A click that passed the checks needing no database, ready to be stored."""

    click: Click
    event_id: str
    shared_new: bool | None
    """The endpoint's verdict on ``event:{event_id}`` (None: record it when storing)."""


class ClickAdmission:
    """Turns a ``card.action.trigger`` into a click to store, or a refusal toast."""

    def __init__(self, guard: ReplayGuard, adapter: FeishuAdapter, auditor: Auditor) -> None:
        self._guard = guard
        self._adapter = adapter
        self._auditor = auditor

    def admit(self, data: P2CardActionTrigger) -> P2CardActionTriggerResponse | Admitted:
        """Checks that need no database (this process's dedupe, replay window, shape):
        a refusal toast, or the click to store. The rest (card, message, authorization,
        values) is checked when deciding, from the stored click."""
        header, event = data.header, data.event
        event_id = getattr(header, "event_id", None) or ""
        operator = getattr(getattr(event, "operator", None), "open_id", None)
        who = Identity(PLATFORM, operator) if operator else None
        action = getattr(event, "action", None)
        parsed = parse_callback_value(getattr(action, "value", None))
        claimed_ref = parsed[0] if parsed else None
        context = getattr(event, "context", None)
        message_id = getattr(context, "open_message_id", None)
        chat_id = getattr(context, "open_chat_id", None)
        if not self._guard.first_event(event_id):
            log.info("duplicate feishu callback ignored", extra={"event_id": event_id})
            self._auditor.audit_later(
                claimed_ref, who, "Duplicate Feishu callback (already handled).",
                check="duplicate_event", event_id=event_id[:200])
            return P2CardActionTriggerResponse({})
        created = parse_epoch(getattr(header, "create_time", None))
        if created is None or not self._guard.fresh(created):
            log.warning("stale feishu callback refused", extra={"event_id": event_id})
            self._auditor.audit_later(
                claimed_ref, who, "Feishu callback outside the replay window.",
                check="stale_event", event_id=event_id[:200],
                create_time=str(getattr(header, "create_time", None))[:32])
            return toast("error", said("click.too_old"))
        if who is None or event is None or parsed is None:
            log.warning("malformed feishu callback refused", extra={"event_id": event_id})
            self._auditor.audit_later(
                claimed_ref, who, "Malformed Feishu callback (no operator or "
                "no valid button value).", check="malformed_callback",
                event_id=event_id[:200], message_id=str(message_id or "")[:200])
            return toast("error", said("button.invalid"))
        ref, action_id = parsed
        form_value = getattr(action, "form_value", None) or {}
        values = {k: v for k, v in form_value.items() if isinstance(k, str)}
        # Read with the card when deciding (``FeishuAdapter.read_click``); the message
        # is checked against the ref then too (``clicks_name_their_message``).
        reply_to = {"locale": self._adapter.locale_of(ref)}
        if message_id:
            reply_to["message"] = str(message_id)
        if chat_id:
            reply_to["chat"] = str(chat_id)  # where a later word only they see can go
        kind = "withdraw" if action_id == WITHDRAW_TOKEN else "respond"
        click = Click(PLATFORM, ref, who, action_id, values, kind=kind, reply_to=reply_to)
        return Admitted(click, event_id, shared_verdict(event_id))
