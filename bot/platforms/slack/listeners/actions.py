"""Button clicks on request cards (``block_actions``).

Ack first, always: Slack gives us 3 seconds and a click must never show the
"this app did not respond" warning. Then, in order: find the request, read the
typed values with the renderer, and let the engine authorize, validate and
compare-and-set. The engine updates the shared card itself (``chat.update`` through
``SlackAdapter.update``); every refusal is explained to the clicker ephemerally.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from pydantic import JsonValue
from slack_bolt.async_app import AsyncAck, AsyncRespond
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.engine.ports import Identity
from bot.platforms.slack.client import error_code
from bot.platforms.slack.engine_api import SlackEngine
from bot.platforms.slack.identity import from_interaction
from bot.platforms.slack.replies import audit_refusal, safe_text, tell
from renderers import slack as render
from renderers.card import RequestCard, index_token

log = logging.getLogger(__name__)

UNKNOWN_BUTTON = "I don't recognise this button; the message may be outdated."
FAILED = "Something went wrong while recording your answer; please try again."


def responder(body: Mapping[str, Any]) -> Identity:
    """The clicker as Slack vouches for them (the payload is signature-checked), with
    their team so Slack Connect guests are told apart."""
    return from_interaction(body)


def message_location(body: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """``(channel, ts)`` of the clicked message."""
    container = body.get("container") or {}
    channel = container.get("channel_id") or (body.get("channel") or {}).get("id")
    ts = container.get("message_ts") or (body.get("message") or {}).get("ts")
    return (str(channel) if channel else None, str(ts) if ts else None)


class ActionListener:
    """Approve / Reject / any action button of a request card.

    The work after the ack runs at most ``concurrency`` clicks at a time: a burst of
    clicks (a double-click storm, a busy channel) then spends the event loop on
    acking everyone first instead of on database calls that mostly end in
    "already decided".
    """

    def __init__(self, engine: SlackEngine, *, concurrency: int = 4) -> None:
        self._engine = engine
        self._slots = asyncio.Semaphore(concurrency)

    async def __call__(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        action: dict[str, Any],
        client: AsyncWebClient,
        respond: AsyncRespond,
    ) -> None:
        await ack()
        who = responder(body)
        channel, _ts = message_location(body)
        parsed = render.parse_action_id(action.get("action_id")) or render.parse_action_id(
            action.get("value")
        )
        if parsed is None:
            await audit_refusal(self._engine, None, who, UNKNOWN_BUTTON, check="unknown_button",
                                action_id=str(action.get("action_id") or "")[:200])
            await tell(
                client, user=who.user_id, channel=channel, text=UNKNOWN_BUTTON, respond=respond
            )
            return
        ref, token = parsed
        async with self._slots:
            try:
                message = await self._answer(ref, token, who, body)
            except Exception:
                log.exception(
                    "answering a click failed", extra={"platform": "slack", "ref": ref[:64]}
                )
                message = FAILED
            if message:
                await tell(client, user=who.user_id, channel=channel, text=message, respond=respond)

    async def _answer(
        self, ref: str, token: str, who: Identity, body: Mapping[str, Any]
    ) -> str | None:
        """Decide through the engine; returns the ephemeral text to show, if any."""
        card = await self._engine.card(ref)
        values: dict[str, JsonValue] = {}
        action_id = token
        if card is not None:
            state_values = (body.get("state") or {}).get("values") or {}
            values = render.read_values(state_values, card)
            action = render.resolve_action(card.args, token)
            action_id = action.id if action is not None else token
        result = await self._engine.respond(ref, who, action_id, values)
        log.info(
            "slack click answered",
            extra={
                "platform": "slack",
                "ref": ref[:64],
                "user": who.user_id,
                "action_id": action_id[:64],
                "outcome": result.outcome,
            },
        )
        if result.outcome == "accepted":
            return None  # the updated card says it for everyone
        return safe_text(result.message)


class FileButtonListener:
    """ "Attach files…" opens a modal with ``file_input`` (modal-only in Slack).

    ``trigger_id`` expires 3 s after the click, so the modal opens before anything
    slow; the engine authorizes and stages the files when the modal is submitted.
    """

    def __init__(self, engine: SlackEngine) -> None:
        self._engine = engine

    async def __call__(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        action: dict[str, Any],
        client: AsyncWebClient,
        respond: AsyncRespond,
    ) -> None:
        await ack()
        who = responder(body)
        channel, ts = message_location(body)
        parsed = render.parse_file_action_id(action.get("action_id"))
        card = await self._engine.card(parsed[0]) if parsed else None
        if parsed is None or card is None or not channel or not ts:
            await audit_refusal(self._engine, parsed[0] if parsed else None, who, UNKNOWN_BUTTON,
                                check="unknown_file_button",
                                action_id=str(action.get("action_id") or "")[:200])
            await tell(
                client, user=who.user_id, channel=channel, text=UNKNOWN_BUTTON, respond=respond
            )
            return
        if card.status != "pending":
            await audit_refusal(self._engine, card.ref, who, "This request is already closed.",
                                check="file_button_closed", status=card.status)
            await tell(
                client,
                user=who.user_id,
                channel=channel,
                respond=respond,
                text="This request is already closed.",
            )
            return
        field_name = _field_name(card, parsed[1])
        try:
            view = render.file_modal(card, channel, ts, field_name=field_name)
            await client.views_open(trigger_id=str(body.get("trigger_id") or ""), view=view)
        except (SlackApiError, SlackClientError, ValueError) as exc:
            log.warning(
                "views.open failed",
                extra={"platform": "slack", "ref": card.ref, "error": error_code(exc)},
            )
            await tell(
                client,
                user=who.user_id,
                channel=channel,
                respond=respond,
                text="I couldn't open the upload form in time; please click again.",
            )


def _field_name(card: RequestCard, token: str) -> str | None:
    """A field name or ``#index`` token → the field's name (None shows all file fields)."""
    index = index_token(token, "#")
    if index is not None:
        return card.args.fields[index].name if index < len(card.args.fields) else None
    return token if any(f.name == token for f in card.args.fields) else None


async def ignore_other_actions(ack: AsyncAck) -> None:
    """Inputs that dispatch actions (or foreign buttons) only need an ack."""
    await ack()
