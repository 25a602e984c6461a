"""The Revoke button of a standing grant (``ahg:{grant id}``), on the ``/askhuman
grants`` list or on App Home.

The engine decides (``revoke_grant``: only people who may answer the grant's route may
revoke it; a grant already revoked or expired says so) within the ack budget when it
can, so the revocation has happened by the time Slack hears the ack. The clicker is
then told the truth where they clicked, in their language: on the list, which is
replaced by a fresh one with the outcome on top; on App Home, which is republished
the same way. A revocation refreshes everyone's Home (it may list the grant).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncAck, AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from bot.engine.health import DATABASE_DOWN, database_unreachable
from bot.engine.ports import Identity
from bot.engine.results import RespondResult
from bot.platforms.slack.engine_api import SlackEngine
from bot.platforms.slack.grants import grants_reply
from bot.platforms.slack.listeners.actions import (
    ACK_BUDGET,
    UNKNOWN_BUTTON,
    home_state,
    message_location,
    responder,
)
from bot.platforms.slack.people import people
from bot.platforms.slack.replies import audit_refusal, safe_text, tell
from renderers.slack.grants import parse_revoke_action_id
from renderers.words import Said, said

if TYPE_CHECKING:
    from bot.platforms.slack.home import HomeTab

log = logging.getLogger(__name__)

REVOKE_FAILED = said("click.failed")


class GrantRevokeListener:
    """Revokes the clicked grant and tells the clicker what happened."""

    def __init__(self, engine: SlackEngine, home: HomeTab | None = None) -> None:
        self._engine = engine
        self._home = home

    async def __call__(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        action: dict[str, Any],
        client: AsyncWebClient,
        respond: AsyncRespond,
    ) -> None:
        who = responder(body)
        grant_id = parse_revoke_action_id(action.get("action_id"))
        if grant_id is None:
            await ack()
            await audit_refusal(self._engine, None, who, str(UNKNOWN_BUTTON),
                                check="unknown_grant_button",
                                action_id=str(action.get("action_id") or "")[:200])
            channel, _ = message_location(body)
            await tell(client, user=who.user_id, channel=channel, text=UNKNOWN_BUTTON,
                       respond=respond)
            return
        revoking = asyncio.ensure_future(self._revoke(grant_id, who))
        await asyncio.wait({revoking}, timeout=ACK_BUDGET)  # decided before the ack
        await ack()
        words, accepted = await revoking
        if accepted and self._home is not None:
            self._home.announce_change()
        if home_state(body) is not None and self._home is not None:
            await self._home.publish(who.user_id, notice=words, force=True, ok=accepted)
            return
        await self._replace_list(client, respond, body, who, words)

    async def _revoke(self, grant_id: int, who: Identity) -> tuple[Said, bool]:
        """The engine's words for the clicker, and whether the grant was revoked now."""
        try:
            result: RespondResult = await self._engine.revoke_grant(grant_id, who)
        except Exception as exc:
            down = database_unreachable(exc)
            log.warning("revoking a grant failed", exc_info=not down,
                        extra={"platform": "slack", "grant": grant_id,
                               "error": type(exc).__name__})
            return (DATABASE_DOWN if down else REVOKE_FAILED), False
        log.info("slack grant revoke answered", extra={
            "platform": "slack", "grant": grant_id, "user": who.user_id,
            "outcome": result.outcome})
        return result.words, result.outcome == "accepted"

    async def _replace_list(self, client: AsyncWebClient, respond: AsyncRespond,
                            body: dict[str, Any], who: Identity, words: Said) -> None:
        """The list the click came from, fresh, with the outcome on top; a plain
        ephemeral message when there is no list to replace."""
        locale, zone = await people(client).person(who.user_id)
        notice = safe_text(words.text(locale))
        if body.get("response_url"):
            reply = await grants_reply(self._engine, who, locale, zone, notice)
            try:
                await respond(**reply, response_type="ephemeral", replace_original=True)
                return
            except Exception as exc:
                log.info("could not replace the grants list; telling the clicker instead",
                         extra={"platform": "slack", "error": type(exc).__name__})
        channel, _ = message_location(body)
        await tell(client, user=who.user_id, channel=channel, text=words, respond=respond)
