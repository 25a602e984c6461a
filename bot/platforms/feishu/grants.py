"""Feishu ``grants``: the standing grants the sender may revoke, as a card with Revoke
buttons (``renderers.feishu_grants``).

The list is for the sender alone: in a direct chat it is the reply; sent in a group,
it goes to the sender's direct chat with the bot, and the group gets one line saying
so (the grants of routes someone may answer are not everyone's business). After a
Revoke click the card is patched with a fresh list, the click's outcome on top.

Feishu does not tell a bot which language a person reads, so the card speaks the
routes' shared locale (``FeishuAdapter.default_locale``), and after a click the
locale its buttons carry.
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import Any

from bot.engine.health import DATABASE_DOWN, database_unreachable
from bot.engine.ports import Identity
from bot.platforms.feishu.client import FeishuApi, FeishuApiError, dumps
from bot.platforms.feishu.engine_api import EngineApi
from bot.platforms.feishu.message import Incoming
from bot.platforms.grant_lines import grant_lines
from renderers.feishu_grants import grants_card
from renderers.words import Said, said

log = logging.getLogger("askhuman.feishu.events")

_GRANTS = re.compile(r"^\s*/?grants\s*$", re.IGNORECASE)
GRANTS_FAILED = said("grants.failed")


def grants_command(text: str) -> bool:
    """``grants`` or ``/grants`` (an agent named ``grants`` is started with ``grants:``)."""
    return _GRANTS.match(text) is not None


class GrantLists:
    """Sends the list card and patches it after a Revoke click."""

    def __init__(self, engine: EngineApi, api: FeishuApi, locale: str) -> None:
        self._engine = engine
        self._api = api
        self._locale = locale

    async def card(self, who: Identity, locale: str | None = None,
                   notice: str | None = None) -> dict[str, Any]:
        """The list card for ``who`` (raises when the grants cannot be read)."""
        grants = grant_lines(await self._engine.active_grants(who), self._engine.settings)
        return grants_card(grants, locale or self._locale, notice)

    async def send(self, msg: Incoming) -> Said | None:
        """Send ``msg.sender`` their list; the words to reply instead when it failed, or
        to reply in a group (where the list went to their direct chat)."""
        try:
            content = dumps(await self.card(msg.sender))
        except Exception as exc:
            down = database_unreachable(exc)
            log.warning("listing standing grants failed", exc_info=not down,
                        extra={"platform": "feishu", "error": type(exc).__name__})
            return DATABASE_DOWN if down else GRANTS_FAILED
        try:
            if msg.chat_type == "p2p":
                await self._api.reply_message(msg.message_id, "interactive", content)
                return None
            key = hashlib.sha256(f"askhuman|grants|{msg.message_id}".encode()).hexdigest()
            await self._api.send_message("open_id", msg.sender.user_id, "interactive",
                                         content, key[:32])
        except FeishuApiError as exc:
            log.warning("could not send the grants list",
                        extra={"platform": "feishu", "message_id": msg.message_id,
                               "code": exc.code})
            return GRANTS_FAILED
        return said("grants.sent_direct")

    async def patch(self, message_id: str, who: Identity, locale: str, notice: str) -> None:
        """Replace the list card ``message_id`` with ``who``'s fresh list (never raises:
        the toast already told the clicker what happened)."""
        try:
            content = dumps(await self.card(who, locale, notice))
            await self._api.patch_message(message_id, content)
        except Exception as exc:
            log.warning("could not patch the grants list",
                        extra={"platform": "feishu", "message_id": message_id,
                               "error": type(exc).__name__})
