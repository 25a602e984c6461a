"""Telling one person something only they can see.

Refusals must never be silent (an ignored click looks like a broken bot), and they
must not change the shared message. ``chat.postEphemeral`` works in any channel the
bot can post to; where it cannot (a DM the bot is not part of), the interaction's
``response_url`` still can.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import JsonValue
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.engine.ports import Identity
from bot.platforms.slack.client import error_code
from bot.platforms.slack.engine_api import SlackEngine
from bot.platforms.slack.people import in_their_words
from renderers.markdown import slack_escape, truncate
from renderers.words import Said

log = logging.getLogger(__name__)

MAX_EPHEMERAL = 2900


def safe_text(text: str) -> str:
    """Engine messages may quote labels or ids that came from a model or a payload."""
    return truncate(slack_escape(text), MAX_EPHEMERAL)


async def tell(
    client: AsyncWebClient,
    *,
    user: str,
    channel: str | None,
    text: Said,
    respond: AsyncRespond | None = None,
    thread_ts: str | None = None,
) -> None:
    """Send the words ``text`` to ``user`` only, in their Slack locale
    (``bot.platforms.slack.people``), escaped as mrkdwn."""
    shown = safe_text(await in_their_words(client, user, text))
    if channel:
        try:
            kwargs: dict[str, Any] = {"channel": channel, "user": user, "text": shown}
            if thread_ts:
                kwargs["thread_ts"] = thread_ts
            await client.chat_postEphemeral(**kwargs)
            return
        except (SlackApiError, SlackClientError, OSError, TimeoutError) as exc:
            log.info(
                "chat.postEphemeral failed; trying response_url",
                extra={"platform": "slack", "channel": channel, "error": error_code(exc)},
            )
    if respond is not None:
        try:
            await respond(text=shown, response_type="ephemeral", replace_original=False)
        except Exception as exc:  # the last resort must not raise into Bolt
            log.warning(
                "could not tell the user", extra={"platform": "slack", "error": type(exc).__name__}
            )


async def audit_refusal(
    engine: SlackEngine, ref: str | None, who: Identity | None, reason: str,
    **details: JsonValue,
) -> None:
    """Audit a refusal decided here, outside the engine (never raises).

    Only call it for requests Slack vouched for (signature-checked HTTP, Socket Mode):
    Bolt rejects unsigned ones before any listener or middleware of ours runs.
    """
    try:
        await engine.audit_refusal(ref, who, reason, {"platform": "slack", **details})
    except Exception:
        log.exception("could not audit a refusal", extra={"platform": "slack"})
