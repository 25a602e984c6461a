"""``PlatformAdapter`` for Slack: post cards, update them, post run results.

The engine calls these after its transactions commit. Transient Slack trouble is
retried by the client's handlers; what is left is permanent, so ``deliver`` raises
``DeliveryError`` (the engine resolves the request ``unavailable``) while ``update``
and ``post_run_result`` log and carry on: the decision is already stored, and a
stale card must never undo it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pydantic import JsonValue
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.engine.ports import DeliveryError, DeliveryRef, DeliveryTarget, Identity, Origin
from bot.platforms.slack.client import error_code
from renderers.card import RequestCard
from renderers.markdown import slack_escape, truncate
from renderers.slack import read_values, render_request, resolve_action

log = logging.getLogger(__name__)

PLATFORM = "slack"
MAX_RESULT_CHARS = 3900
MAX_EPHEMERAL_CHARS = 2900


class SlackAdapter:
    """Outbound Slack calls for the engine."""

    platform = PLATFORM

    def __init__(self, client: AsyncWebClient) -> None:
        self._client = client

    async def deliver(self, card: RequestCard, target: DeliveryTarget) -> DeliveryRef:
        """Post the card to a channel, or to a user's DM (opened with conversations.open)."""
        message = render_request(card)
        try:
            channel = target.id
            if target.kind == "user":
                opened = await self._client.conversations_open(users=target.id)
                channel = str((opened.get("channel") or {}).get("id") or "")
                if not channel:
                    raise DeliveryError(f"conversations.open gave no channel for {target.id}")
            posted = await self._client.chat_postMessage(
                channel=channel,
                text=message["text"],
                blocks=message["blocks"],
                unfurl_links=False,
                unfurl_media=False,
            )
        except (SlackApiError, SlackClientError, OSError, TimeoutError) as exc:
            code = error_code(exc)
            log.warning(
                "slack delivery failed",
                extra={"platform": PLATFORM, "ref": card.ref, "target": target.id, "error": code},
            )
            raise DeliveryError(f"Slack could not deliver to {target.id}: {code}") from exc
        ref = DeliveryRef(
            platform=PLATFORM, channel=str(posted["channel"]), message_id=str(posted["ts"])
        )
        log.info(
            "slack card delivered",
            extra={
                "platform": PLATFORM,
                "ref": card.ref,
                "channel": ref.channel,
                "ts": ref.message_id,
            },
        )
        return ref

    async def update(self, card: RequestCard, ref: DeliveryRef) -> None:
        """Re-render the card in place for everyone (chat.update)."""
        message = render_request(card)
        try:
            await self._client.chat_update(
                channel=ref.channel,
                ts=ref.message_id,
                text=message["text"],
                blocks=message["blocks"],
            )
        except (SlackApiError, SlackClientError, OSError, TimeoutError) as exc:
            log.warning(
                "slack card update failed",
                extra={
                    "platform": PLATFORM,
                    "ref": card.ref,
                    "channel": ref.channel,
                    "ts": ref.message_id,
                    "error": error_code(exc),
                },
            )
            return
        log.info(
            "slack card updated",
            extra={
                "platform": PLATFORM,
                "ref": card.ref,
                "status": card.status,
                "ts": ref.message_id,
            },
        )

    async def post_run_result(self, origin: Origin, text: str) -> None:
        """Post a run's output (untrusted: escaped, truncated) in the thread it came from."""
        if not origin.channel:
            log.info("run result has no slack channel to go to", extra={"platform": PLATFORM})
            return
        try:
            await self._post_in_thread(origin.channel, origin.thread, text, "(empty output)")
        except (SlackApiError, SlackClientError, OSError, TimeoutError) as exc:
            log.warning(
                "posting run result failed",
                extra={"platform": PLATFORM, "channel": origin.channel, "error": error_code(exc)},
            )

    async def remind(self, card: RequestCard, ref: DeliveryRef, text: str) -> None:
        """Post a reminder in the card's thread (escaped plain text, no mentions).

        What still fails after the client's retries is permanent: ``DeliveryError``.
        """
        try:
            await self._post_in_thread(
                ref.channel, ref.message_id, text, "Reminder: still waiting."
            )
        except (SlackApiError, SlackClientError, OSError, TimeoutError) as exc:
            code = error_code(exc)
            log.warning(
                "slack reminder failed",
                extra={"platform": PLATFORM, "ref": card.ref, "ts": ref.message_id,
                       "error": code},
            )
            raise DeliveryError(f"Slack refused the reminder: {code}") from exc
        log.info(
            "slack reminder posted",
            extra={"platform": PLATFORM, "ref": card.ref, "ts": ref.message_id},
        )

    @staticmethod
    def read_click(
        card: RequestCard, action_id: str, values: Mapping[str, Any]
    ) -> tuple[str, dict[str, JsonValue]]:
        """A stored click's button token and raw ``state.values`` → ``(action id, values)``
        (the listener stores clicks before the ack, without reading the card)."""
        action = resolve_action(card.args, action_id)
        return (action.id if action is not None else action_id), read_values(values, card)

    async def tell_clicker(self, who: Identity, reply_to: Mapping[str, str], text: str) -> None:
        """Tell one person, ephemerally where they clicked, what became of a click the
        engine decided later (after a restart). Slack refusing (they left the channel,
        say) is logged, not retried; a transport error is raised for a retry."""
        channel = reply_to.get("channel")
        if not channel:
            log.info("no channel to tell the clicker in", extra={"platform": PLATFORM})
            return
        try:
            await self._client.chat_postEphemeral(
                channel=channel, user=who.user_id,
                text=truncate(slack_escape(text), MAX_EPHEMERAL_CHARS) or "Done.")
        except SlackApiError as exc:
            log.warning("could not tell the clicker", extra={
                "platform": PLATFORM, "channel": channel, "error": error_code(exc)})

    async def _post_in_thread(
        self, channel: str, thread: str | None, text: str, if_empty: str
    ) -> None:
        """Post untrusted text as escaped, truncated plain text, with no link unfurls."""
        await self._client.chat_postMessage(
            channel=channel,
            thread_ts=thread,
            text=truncate(slack_escape(text), MAX_RESULT_CHARS) or if_empty,
            unfurl_links=False,
            unfurl_media=False,
        )
