""""Edit and approve": the button opens a modal, the modal's submit is a click.

The button (``ahe:{ref}``) opens the edit modal at once (``trigger_id`` expires 3 s
after the click). On submit the edited values are checked against the tool's JSON
Schema (``bot.engine.edits.check_edit``) before anything is stored: a bad value is
shown on its own input (``response_action: errors``) and nothing is recorded. A
valid submit is stored in the click inbox as an ``approve_edit`` click with the
modal's ``state.values`` (read with the card when deciding, like a card click), the
modal closes, and the engine decides it like any click; what became of it is told
to the editor ephemerally unless the updated card says it for everyone.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncRespond
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.engine.clicks import NOT_RECORDED
from bot.engine.edits import InvalidEdit, check_edit
from bot.engine.inbox import Click
from bot.platforms.slack.client import error_code
from bot.platforms.slack.engine_api import SlackEngine
from bot.platforms.slack.listeners.actions import (
    ACK_BUDGET,
    UNKNOWN_BUTTON,
    message_location,
    responder,
)
from bot.platforms.slack.people import people
from bot.platforms.slack.replies import audit_refusal, tell
from renderers import slack as render
from renderers.tool_card import APPROVE_EDIT
from renderers.words import said

log = logging.getLogger(__name__)


class EditButtonListener:
    """Opens the edit modal of a pending tool card."""

    def __init__(self, engine: SlackEngine) -> None:
        self._engine = engine

    async def __call__(self, ack: AsyncAck, body: dict[str, Any], action: dict[str, Any],
                       client: AsyncWebClient, respond: AsyncRespond) -> None:
        await ack()
        who = responder(body)
        channel, ts = message_location(body)
        ref = render.parse_edit_action_id(action.get("action_id"))
        card = await self._engine.card(ref) if ref else None
        if card is None or card.tool is None or not card.tool.editable or not channel or not ts:
            await audit_refusal(self._engine, ref, who, str(UNKNOWN_BUTTON),
                                check="unknown_edit_button")
            await tell(client, user=who.user_id, channel=channel, text=UNKNOWN_BUTTON,
                       respond=respond)
            return
        if card.status != "pending":
            await tell(client, user=who.user_id, channel=channel, respond=respond,
                       text=said("closed.already"))
            return
        refused = await self._engine.answer_refusal(card.ref, who, "edit_open")
        if refused is not None:  # told here, before they fill in a form they may not send
            await tell(client, user=who.user_id, channel=channel, respond=respond,
                       text=refused.words)
            return
        try:
            view = render.edit_modal(card, channel, ts)
            await client.views_open(trigger_id=str(body.get("trigger_id") or ""), view=view)
        except (SlackApiError, SlackClientError, ValueError) as exc:
            log.warning("views.open failed", extra={"platform": "slack", "ref": card.ref,
                                                     "error": error_code(exc)})
            await tell(client, user=who.user_id, channel=channel, respond=respond,
                       text=said("upload.not_opened"))


class EditSubmissionListener:
    """Checks the edit, stores it as an ``approve_edit`` click, then decides it."""

    def __init__(self, engine: SlackEngine) -> None:
        self._engine = engine

    async def __call__(self, ack: AsyncAck, body: dict[str, Any],
                       client: AsyncWebClient) -> None:
        view = body.get("view") or {}
        who = responder(body)
        context = render.parse_private_metadata(view.get("private_metadata"))
        card = await self._engine.card(context.ref) if context else None
        if context is None or card is None or card.tool is None:
            await ack()
            await audit_refusal(self._engine, context.ref if context else None, who,
                                str(UNKNOWN_BUTTON), check="unknown_edit_form")
            return
        state = (view.get("state") or {}).get("values") or {}
        try:
            check_edit(card.tool, render.read_edit_state(state, card))
        except InvalidEdit as exc:
            block = render.edit_block_id(card, exc.argument) or next(iter(state), "")
            text = exc.words.text(await people(client).locale(who.user_id))
            await ack(response_action="errors", errors={block: text[:2000]})
            return  # nothing stored: the person fixes the value in the modal
        click = Click("slack", card.ref, who, APPROVE_EDIT, state,
                      reply_to={"channel": context.channel, "message": context.ts})
        try:
            recorded = await self._engine.record_click(click, budget=ACK_BUDGET)
        except Exception:
            log.exception("storing an edit failed", extra={"platform": "slack"})
            recorded = None
        if recorded is None:
            text = NOT_RECORDED.text(await people(client).locale(who.user_id))
            await ack(response_action="errors", errors={
                next(iter(state), ""): text[:2000]})
            return
        await ack()
        result = await self._engine.decide_click(recorded)
        if result.outcome != "accepted":
            await tell(client, user=who.user_id, channel=context.channel, text=result.words)
