"""Feishu ``Directory``: who a configured approver entry is, and who is in a chat.

Admins may list open_ids, emails or mobile numbers; the engine authorizes against
open_ids (the only id present in every callback). Emails and mobiles are resolved
with ``contact.v3.user.batch_get_id`` once (at start-up via ``warm_up`` and lazily
afterwards) and cached for the life of the process: a person's open_id for this app
never changes. Chat membership changes, so it is cached only briefly.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Iterable

from bot.platforms.feishu.client import FeishuApi, FeishuApiError

log = logging.getLogger("askhuman.feishu.directory")

_MOBILE = re.compile(r"^\+?\d[\d\- ]{5,}$")


def entry_kind(entry: str) -> str:
    """Classify a configured user entry: ``email``, ``mobile`` or ``id`` (used as is)."""
    if "@" in entry:
        return "email"
    if _MOBILE.match(entry):
        return "mobile"
    return "id"


class FeishuDirectory:
    """Implements ``bot.engine.ports.Directory`` for Feishu."""

    def __init__(
        self,
        api: FeishuApi,
        chat_ttl_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api
        self._chat_ttl = chat_ttl_seconds
        self._clock = clock
        self._resolved: dict[str, str | None] = {}
        """entry -> open_id, or None when Feishu does not know it (not retried)."""
        self._chats: dict[str, tuple[float, frozenset[str]]] = {}
        self._lock = asyncio.Lock()

    async def warm_up(self, entries: Iterable[str]) -> None:
        """Resolve every configured entry at start-up so mistakes show in the logs early."""
        await self.resolve_users(list(entries))

    async def resolve_users(self, users: list[str]) -> set[str]:
        """Map entries to open_ids; unknown emails/mobiles are dropped (and logged once)."""
        unique = dict.fromkeys(users)
        pending = [u for u in unique if entry_kind(u) != "id" and u not in self._resolved]
        if pending:
            async with self._lock:
                pending = [u for u in pending if u not in self._resolved]
                if pending:
                    await self._lookup(pending)
        out: set[str] = set()
        for user in users:
            if entry_kind(user) == "id":
                out.add(user)
            elif (open_id := self._resolved.get(user)) is not None:
                out.add(open_id)
        return out

    async def _lookup(self, entries: list[str]) -> None:
        emails = [e for e in entries if entry_kind(e) == "email"]
        mobiles = [e for e in entries if entry_kind(e) == "mobile"]
        try:
            found = await self._api.batch_get_open_ids(
                [e.lower() for e in emails], [_normal_mobile(m) for m in mobiles]
            )
        except FeishuApiError as exc:
            # Not cached: a transient failure must not lock an approver out for good.
            log.warning(
                "could not resolve feishu approvers",
                extra={"count": len(entries), "code": exc.code, "status": exc.status},
            )
            return
        for email in emails:
            self._resolved[email] = found.get(email.lower())
        for mobile in mobiles:
            self._resolved[mobile] = found.get(_normal_mobile(mobile))
        missing = [e for e in entries if self._resolved.get(e) is None]
        if missing:
            # Entries are admin configuration (not secrets); name them so typos get fixed.
            log.warning(
                "feishu approvers not found (outside the app's availability or contact range?)",
                extra={"entries": missing},
            )

    async def group_members(self, group_id: str) -> set[str]:
        """Feishu has no user groups askhuman can use; approvers list users or chats."""
        return set()

    async def chat_members(self, chat_id: str) -> set[str]:
        """Members of a chat the bot is in, cached for ``chat_ttl_seconds``."""
        now = self._clock()
        cached = self._chats.get(chat_id)
        if cached is not None and cached[0] > now:
            return set(cached[1])
        try:
            members = frozenset(await self._api.chat_member_open_ids(chat_id))
        except FeishuApiError as exc:
            log.warning(
                "could not list feishu chat members",
                extra={"chat_id": chat_id, "code": exc.code, "status": exc.status},
            )
            return set(cached[1]) if cached is not None else set()
        self._chats[chat_id] = (now + self._chat_ttl, members)
        return set(members)


def _normal_mobile(value: str) -> str:
    return value.replace(" ", "").replace("-", "")
