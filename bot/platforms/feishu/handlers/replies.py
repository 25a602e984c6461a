"""Text the bot sends back: message replies, and engine text made readable."""

from __future__ import annotations

import logging

from bot.platforms.feishu.adapter import plain_text
from bot.platforms.feishu.client import FeishuApi, FeishuApiError, dumps
from bot.platforms.feishu.names import NEUTRAL, OPEN_ID_IN_TEXT, NameCache

log = logging.getLogger("askhuman.feishu.events")


class Replies:
    """Replies to messages, and open_ids in engine text turned into names."""

    def __init__(self, api: FeishuApi, names: NameCache | None, reply_budget: float) -> None:
        self._api = api
        self._names = names
        self._budget = reply_budget

    async def humanize(self, text: str) -> str:
        """Engine text for a toast or reply: open_ids become names (plain text has no
        ``<at>``), bounded so the click's reply stays within its budget."""
        if self._names is None:
            return text
        try:
            return await self._names.humanize(text, timeout=min(0.5, self._budget / 4))
        except Exception:
            log.exception("could not replace open_ids with names")
            return OPEN_ID_IN_TEXT.sub(NEUTRAL, text)

    async def reply(self, message_id: str, text: str) -> None:
        try:
            body = plain_text(text) or "…"
            await self._api.reply_message(message_id, "text", dumps({"text": body}))
        except FeishuApiError as exc:
            log.warning("feishu reply failed", extra={"message_id": message_id, "code": exc.code})
