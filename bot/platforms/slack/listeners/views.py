"""The file-upload modal's ``view_submission``.

Unlike a message, a modal can show errors inline (``response_action: errors``, keyed
by the input block id), so the engine is asked *before* acking. The submission is
first stored in the click inbox (bounded by ``ACK_BUDGET``): if it cannot be stored
in time the modal shows that nothing was recorded. Then the engine stages the files
from the stored row; if that takes longer than what is left of the budget the modal
is closed (the submission is safe in the database) and the outcome is sent
ephemerally instead, so Slack never times out and nothing acked is lost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from slack_bolt.async_app import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.askhuman.schema import AskHumanField
from bot.engine.inbox import Click, Recorded
from bot.engine.ports import Identity
from bot.platforms.slack.engine_api import SlackEngine
from bot.platforms.slack.listeners.actions import responder
from bot.platforms.slack.replies import audit_refusal, tell
from renderers import slack as render

log = logging.getLogger(__name__)

ACK_BUDGET = 2.5
"""Seconds we may spend storing (and, if quick, staging) the files before acking."""
GONE = "This upload form no longer matches a request; it may be outdated."
UNAVAILABLE = "askhuman could not save your files just now; nothing was recorded. Please try again."


class FileSubmissionListener:
    """Stages uploaded files with the engine until the person clicks an action."""

    def __init__(self, engine: SlackEngine) -> None:
        self._engine = engine

    async def __call__(self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        started = time.monotonic()
        view = body.get("view") or {}
        who = responder(body)
        context = render.parse_private_metadata(view.get("private_metadata"))
        try:
            card = await self._engine.card(context.ref) if context else None
        except Exception:
            log.exception("reading the upload form's request failed", extra={"platform": "slack"})
            await _ack_error(ack, view, UNAVAILABLE)
            return
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
        if not fields:
            await ack()
            return
        recorded = await self._record(context.ref, who, fields, values, context.channel,
                                      context.ts, ACK_BUDGET - (time.monotonic() - started))
        if recorded is None:
            await _ack_error(ack, view, UNAVAILABLE)
            return
        work = asyncio.ensure_future(self._engine.decide_click(recorded))
        left = ACK_BUDGET - (time.monotonic() - started)
        done, _ = await asyncio.wait({work}, timeout=max(left, 0.0))
        if not done:
            await ack()  # stored: the engine finishes it, and the outcome is sent below
            result = await work
            if not result.ok:
                await tell(client, user=who.user_id, channel=context.channel,
                           text=result.words)
            return
        result = work.result()
        if not result.ok and _input_block_ids(view):
            await ack(response_action="errors", errors=_errors_for(view, result.message))
            return
        await ack()
        await tell(client, user=who.user_id, channel=context.channel, text=result.words)

    async def _record(
        self, ref: str, who: Identity, fields: Sequence[AskHumanField], values: dict[str, Any],
        channel: str, ts: str, budget: float,
    ) -> Recorded | None:
        """Store the submission (every field's files at once); None if it could not be.

        A failure (the database is down, say) must still be acked with a reason the
        person can read, or Slack shows only a generic error.
        """
        files = {f.name: values.get(f.name) or [] for f in fields}
        click = Click("slack", ref, who, "", files, kind="attach",
                      reply_to={"channel": channel, "message": ts})
        try:
            return await self._engine.record_click(click, budget=budget)
        except Exception:
            log.exception("storing uploaded files failed", extra={"platform": "slack"})
            return None


async def _ack_error(ack: AsyncAck, view: dict[str, Any], message: str) -> None:
    """Keep the modal open with ``message`` on its inputs (or just close it if it has none)."""
    if _input_block_ids(view):
        await ack(response_action="errors", errors=_errors_everywhere(view, message))
    else:
        await ack()


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
