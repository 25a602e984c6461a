"""Each person's Slack locale and time zone (``users.info`` with ``include_locale``).

Slack tells us the language a person uses (``user.locale``, e.g. ``zh-CN``) and their
time zone (``user.tz``). What askhuman tells one person (refusals, App Home, the
pending list, help) is written in that locale when the catalogues have it
(``renderers.i18n``, ``renderers.words``), else in English. Answers are cached per
client for an hour (at most ``MAX_PEOPLE``); a lookup that fails or takes longer than
``TIMEOUT`` gives "unknown" (English, UTC) rather than delaying the reply.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
import weakref
from typing import Any

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.platforms.slack.client import error_code
from renderers.words import Said

log = logging.getLogger(__name__)

TTL = 3600.0
MAX_PEOPLE = 5000
TIMEOUT = 1.0
Person = tuple[str | None, str | None]
"""``(locale, tz)``; None where Slack does not say."""


class People:
    """A bounded, expiring cache of ``(locale, tz)`` per user id for one client."""

    def __init__(self, client: AsyncWebClient) -> None:
        self._client = client
        self._known: collections.OrderedDict[str, tuple[float, Person]] = (
            collections.OrderedDict())

    async def person(self, user_id: str) -> Person:
        cached = self._known.get(user_id)
        if cached is not None and time.monotonic() - cached[0] < TTL:
            return cached[1]
        try:
            info = await asyncio.wait_for(
                self._client.users_info(user=user_id, include_locale=True), TIMEOUT)
        except (SlackApiError, SlackClientError, OSError, TimeoutError) as exc:
            log.info("users.info (locale) failed", extra={
                "platform": "slack", "user": user_id, "error": error_code(exc)})
            return cached[1] if cached else (None, None)
        user: Any = info.get("user") or {}
        found: Person = (str(user.get("locale") or "") or None, str(user.get("tz") or "") or None)
        self._known[user_id] = (time.monotonic(), found)
        self._known.move_to_end(user_id)
        while len(self._known) > MAX_PEOPLE:
            self._known.popitem(last=False)
        return found

    async def locale(self, user_id: str) -> str | None:
        return (await self.person(user_id))[0]


_BY_CLIENT: weakref.WeakKeyDictionary[AsyncWebClient, People] = weakref.WeakKeyDictionary()


def people(client: AsyncWebClient) -> People:
    """The cache for ``client`` (one per Slack workspace connection)."""
    found = _BY_CLIENT.get(client)
    if found is None:
        found = _BY_CLIENT[client] = People(client)
    return found


async def in_their_words(client: AsyncWebClient, user_id: str, words: Said) -> str:
    """``words`` in ``user_id``'s Slack locale (English when it is not known)."""
    return words.text(await people(client).locale(user_id) if user_id else None)
