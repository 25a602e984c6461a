"""Batch decisions on Slack: the pending list's "Approve selected" / "Reject selected".

The list is the ephemeral reply to ``/askhuman pending`` (``list_message``) or a part
of App Home (``renderers.home``). A click on one of its buttons is a ``block_actions``
payload carrying the list's checkboxes and reason (``state.values``). Like a card
click, the batch is stored before the ack (one click per selected request, one group
commit: ``engine.record_batch``); if the database does not take it in time, the
clicker is told nothing was recorded. Then each item is decided as a lone click
(``engine.decide_batch``) and the clicker reads what became of each: the ephemeral
list is replaced by the answer and a fresh list, Home is republished with the answer
on top. Every request card is updated by the engine's outbox, per decision.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncAck, AsyncRespond
from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from bot.engine.batch import StoredBatch
from bot.engine.clicks import NOT_RECORDED
from bot.engine.ports import Identity
from bot.platforms.slack.engine_api import SlackEngine
from bot.platforms.slack.listeners.actions import (
    ACK_BUDGET,
    AcksFirst,
    home_state,
    message_location,
    responder,
)
from bot.platforms.slack.pending_list import list_message, pending_text
from bot.platforms.slack.people import people
from bot.platforms.slack.replies import safe_text, tell
from renderers.batch import MAX_ITEMS
from renderers.slack.batch_list import BATCH_ACTION_ID_PATTERN, read_selection
from renderers.words import Said, said

if TYPE_CHECKING:
    from bot.platforms.slack.home import HomeTab

log = logging.getLogger(__name__)

PER_PAGE = MAX_ITEMS
BATCH = "askhuman_batch"
"""The key of ``BatchListener.before_ack``'s outcome in Bolt's context."""


class BatchListener:
    """``ahb:approve`` / ``ahb:reject`` on a pending list (a message or App Home)."""

    def __init__(self, engine: SlackEngine, *, home: HomeTab | None = None,
                 acks_first: AcksFirst | None = None) -> None:
        self._engine = engine
        self._home = home
        self._acks_first = acks_first or AcksFirst()

    async def before_ack(self, body: dict[str, Any], action: dict[str, Any],
                         context: AsyncBoltContext, next: Callable[[], Awaitable[None]]
                         ) -> None:
        """(listener middleware) Store the batch before Bolt starts its ack clock, so a
        slow store never turns into Bolt's 404 (``ActionListener.before_ack``)."""
        context[BATCH] = await self._store(body, action)
        await next()

    async def _store(self, body: dict[str, Any], action: dict[str, Any]
                     ) -> StoredBatch | Said:
        """Every selected item's click, stored; or the words to tell the clicker."""
        who = responder(body)
        match = BATCH_ACTION_ID_PATTERN.match(str(action.get("action_id") or ""))
        on_home = home_state(body)
        state = body.get("state")
        values = on_home if on_home is not None else (
            state.get("values") if isinstance(state, dict) else None)
        refs, reason = read_selection(values if isinstance(values, dict) else {})
        if match is None or not refs:
            return said("batch.none_selected")
        channel, _ = message_location(body)
        self._acks_first.arrived()
        try:
            stored = await self._engine.record_batch(
                who, match.group(1), refs, reason,
                {"channel": channel} if channel else {}, ACK_BUDGET)
        except Exception:
            log.exception("recording a batch failed", extra={"platform": "slack"})
            return NOT_RECORDED
        finally:
            self._acks_first.acked()
        return stored if stored.stored_any else NOT_RECORDED

    async def __call__(self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient,
                       respond: AsyncRespond, context: AsyncBoltContext) -> None:
        """Bolt's entry, after ``before_ack``: ack, then decide and answer."""
        stored = context.get(BATCH, NOT_RECORDED)
        await ack()  # only now: every item's click is stored (or the clicker is told)
        who = responder(body)
        if not isinstance(stored, StoredBatch):
            await self._tell(client, respond, who, body,
                             stored if isinstance(stored, Said) else NOT_RECORDED)
            return
        result = await self._engine.decide_batch(stored)
        log.info("slack batch answered", extra={
            "platform": "slack", "user": who.user_id, "verb": stored.verb,
            "decided": len(result.decided), "refused": len(result.refused)})
        await self._answer(client, respond, who, body, result.words)

    async def _answer(self, client: AsyncWebClient, respond: AsyncRespond, who: Identity,
                      body: dict[str, Any], words: Said) -> None:
        """The answer on top of a fresh list, where the list was."""
        if home_state(body) is not None and self._home is not None:
            await self._home.publish(who.user_id, notice=words, force=True)
            return
        locale, zone = await people(client).person(who.user_id)
        answer = safe_text(words.text(locale))
        try:
            page = await self._engine.pending_page(who, 1, PER_PAGE)
            shown = list_message(page, pending_text(page, locale, zone), locale, zone, answer)
        except Exception:
            log.exception("could not list pending requests after a batch")
            shown = {"text": answer}
        try:
            await respond(replace_original=True, response_type="ephemeral", **shown)
        except Exception:
            log.warning("could not replace the pending list; telling the clicker instead",
                        exc_info=True)
            channel, _ = message_location(body)
            await tell(client, user=who.user_id, channel=channel, text=words)

    async def _tell(self, client: AsyncWebClient, respond: AsyncRespond, who: Identity,
                    body: dict[str, Any], words: Said) -> None:
        if home_state(body) is not None and self._home is not None:
            await self._home.publish(who.user_id, notice=words, force=True)
            return
        channel, _ = message_location(body)
        await tell(client, user=who.user_id, channel=channel, text=words, respond=respond)

