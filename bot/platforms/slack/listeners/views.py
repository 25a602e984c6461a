"""The file-upload modal's ``view_submission``.

Unlike a message, a modal can show errors inline (``response_action: errors``, keyed
by the input block id), so the engine is asked *before* acking. The engine call is a
short database transaction; if it ever takes longer than ``ACK_BUDGET`` seconds the
modal is closed and the outcome is sent ephemerally instead, so Slack never times
out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from slack_bolt.async_app import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.askhuman.schema import AskHumanField
from bot.engine.ports import Identity
from bot.engine.results import RespondResult
from bot.platforms.slack.engine_api import SlackEngine
from bot.platforms.slack.listeners.actions import responder
from bot.platforms.slack.replies import audit_refusal, safe_text, tell
from renderers import slack as render

log = logging.getLogger(__name__)

ACK_BUDGET = 2.0
"""Seconds we wait for the engine before acking a view_submission without it."""
GONE = "This upload form no longer matches a request; it may be outdated."
UNAVAILABLE = "askhuman could not save your files just now; nothing was recorded. Please try again."


class FileSubmissionListener:
    """Stages uploaded files with the engine until the person clicks an action."""

    def __init__(self, engine: SlackEngine) -> None:
        self._engine = engine

    async def __call__(self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        view = body.get("view") or {}
        who = responder(body)
        context = render.parse_private_metadata(view.get("private_metadata"))
        card = await self._engine.card(context.ref) if context else None
        if context is None or card is None:
            await ack(response_action="errors", errors=_errors_everywhere(view, GONE))
            await audit_refusal(self._engine, context.ref if context else None, who, GONE,
                                check="unknown_upload_form")
            return
        values = render.read_values((view.get("state") or {}).get("values") or {}, card)
        fields = [
            f
            for f in card.args.fields
            if f.type in ("file", "file-list") and f.name in (context.field_name, *values)
        ]
        work = asyncio.ensure_future(self._attach(context.ref, who, fields, values))
        done, _ = await asyncio.wait({work}, timeout=ACK_BUDGET)
        if not done:
            await ack()
            result = await work
            if result is not None and not result.ok:
                await tell(
                    client,
                    user=who.user_id,
                    channel=context.channel,
                    text=safe_text(result.message),
                )
            return
        result = work.result()
        if result is not None and not result.ok and _input_block_ids(view):
            await ack(response_action="errors", errors=_errors_for(view, result.message))
            return
        await ack()
        if result is not None:
            await tell(
                client, user=who.user_id, channel=context.channel, text=safe_text(result.message)
            )

    async def _attach(
        self, ref: str, who: Identity, fields: Sequence[AskHumanField], values: dict[str, Any]
    ) -> RespondResult | None:
        """Stage each field's files; the first refusal (or the last success) is returned.

        A failure (the database is down, say) becomes a refusal the person can read:
        the modal must always be acked, or Slack shows only a generic error.
        """
        result: RespondResult | None = None
        try:
            for field in fields:
                files = values.get(field.name) or []
                result = await self._engine.attach_files(ref, who, field.name, files)
                if not result.ok:
                    return result
        except Exception:
            log.exception("staging uploaded files failed", extra={"platform": "slack"})
            return RespondResult(outcome="rejected", message=UNAVAILABLE)
        return result


def _input_block_ids(view: dict[str, Any]) -> list[str]:
    return [
        str(b["block_id"])
        for b in view.get("blocks") or []
        if isinstance(b, dict) and b.get("type") == "input" and b.get("block_id")
    ]


def _errors_for(view: dict[str, Any], message: str) -> dict[str, str]:
    """Inline errors must name an input block; the modal shows one field at a time."""
    ids = _input_block_ids(view)
    text = message[:2000]
    return {ids[0]: text} if ids else {}


def _errors_everywhere(view: dict[str, Any], message: str) -> dict[str, str]:
    return {bid: message for bid in _input_block_ids(view)}
