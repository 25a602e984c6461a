"""Text the bot sends back: message replies, and engine words made readable."""

from __future__ import annotations

import logging
from typing import Any

from bot.platforms.feishu.adapter import plain_text
from bot.platforms.feishu.client import FeishuApi, FeishuApiError, dumps
from bot.platforms.feishu.names import NameCache, neutral_words
from renderers.words import Said

log = logging.getLogger("askhuman.feishu.events")


class Replies:
    """Replies to messages, and open_ids in engine words turned into names.

    Feishu does not tell a bot which language a person reads, so replies speak
    ``locale`` (the routes' shared one) unless the caller knows better (a card's)."""

    def __init__(self, api: FeishuApi, names: NameCache | None, reply_budget: float,
                 locale: str | None = None) -> None:
        self._api = api
        self._names = names
        self._budget = reply_budget
        self._locale = locale

    async def humanize_words(self, words: Said) -> Said:
        """Engine words for a toast or reply: open_ids in their parameters become names
        (plain text has no ``<at>``), bounded so the click's reply stays within its
        budget."""
        if self._names is None:
            return words
        try:
            return await self._names.humanize_words(words, timeout=min(0.5, self._budget / 4))
        except Exception:
            log.exception("could not replace open_ids with names")
            return neutral_words(words)

    async def humanize_now(self, words: Said) -> Said:
        """``humanize_words`` for a toast on its way: names already known (or fetched
        within 50 ms), else "another approver"."""
        if self._names is None:
            return words
        try:
            return await self._names.humanize_words(words, timeout=0.05)
        except Exception:
            log.exception("could not replace open_ids with names")
            return neutral_words(words)

    async def say(self, message_id: str, words: Said, locale: str | None = None) -> None:
        """Reply with ``words`` in ``locale`` (else the replies' own)."""
        await self.reply(message_id, words.text(locale or self._locale))

    async def reply(self, message_id: str, text: str) -> None:
        try:
            body = plain_text(text) or "…"
            await self._api.reply_message(message_id, "text", dumps({"text": body}))
        except FeishuApiError as exc:
            log.warning("feishu reply failed", extra={"message_id": message_id, "code": exc.code})

    async def card(self, message_id: str, card: dict[str, Any]) -> None:
        """Reply with an interactive card (the pending list)."""
        try:
            await self._api.reply_message(message_id, "interactive", dumps(card))
        except FeishuApiError as exc:
            log.warning("feishu reply failed", extra={"message_id": message_id, "code": exc.code})
