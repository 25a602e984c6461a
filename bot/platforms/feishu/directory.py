"""Feishu ``Directory``: who a configured approver entry is, and who is in a chat.

Admins may list open_ids, emails or mobile numbers; the engine authorizes against
open_ids (the only id present in every callback). Emails and mobiles are resolved
with ``contact.v3.user.batch_get_id`` (at start-up via ``warm_up`` and lazily
afterwards) and cached for ``resolve_ttl_seconds`` (an address can move to another
person); chat membership changes more often, so it is cached only briefly. Both follow
the rule of ``bot.platforms.directory_cache``: once an answer has expired, a failed
lookup raises ``DirectoryUnavailable`` (the engine refuses) instead of reusing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Iterable

from bot.engine.ports import DirectoryUnavailable
from bot.platforms.directory_cache import Clock, TtlCache
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
        clock: Clock = time.monotonic,
        resolve_ttl_seconds: float = 600.0,
    ) -> None:
        self._api = api
        self.clock = clock
        """Monotonic seconds; tests replace it to expire the caches."""
        self._chats: TtlCache[frozenset[str]] = TtlCache(chat_ttl_seconds, self._now)
        self._resolved: TtlCache[str | None] = TtlCache(resolve_ttl_seconds, self._now)
        """entry -> open_id, or None when Feishu does not know it (asked again after TTL)."""
        self._lock = asyncio.Lock()

    def _now(self) -> float:
        return self.clock()

    async def warm_up(self, entries: Iterable[str]) -> None:
        """Resolve every configured entry at start-up so mistakes show in the logs early."""
        with contextlib.suppress(DirectoryUnavailable):
            await self.resolve_users(list(entries))

    async def resolve_users(self, users: list[str]) -> set[str]:
        """Map entries to open_ids; unknown emails/mobiles are dropped (and logged).

        Entries without a fresh answer are looked up in one batch; if that fails,
        ``DirectoryUnavailable`` is raised (the ids listed as is are not enough to say
        "no" for the entries we could not resolve).
        """
        unique = list(dict.fromkeys(u for u in users if entry_kind(u) != "id"))
        if any(self._resolved.peek(u) is None for u in unique):
            async with self._lock:  # one batch call at a time, shared by everyone waiting
                stale = [u for u in unique if self._resolved.peek(u) is None]
                if stale:
                    for entry, open_id in (await self._lookup(stale)).items():
                        self._resolved.put(entry, open_id)
        out = {u for u in users if entry_kind(u) == "id"}
        for entry in unique:
            hit = self._resolved.peek(entry)
            if hit is None:
                raise DirectoryUnavailable(entry)  # expired while we waited: ask again
            if hit[1] is not None:
                out.add(hit[1])
        return out

    async def _lookup(self, entries: list[str]) -> dict[str, str | None]:
        emails = [e for e in entries if entry_kind(e) == "email"]
        mobiles = [e for e in entries if entry_kind(e) == "mobile"]
        try:
            found = await self._api.batch_get_open_ids(
                [e.lower() for e in emails], [_normal_mobile(m) for m in mobiles]
            )
        except FeishuApiError as exc:
            log.warning(
                "could not resolve feishu users; refusing until Feishu answers again",
                extra={"count": len(entries), "code": exc.code, "status": exc.status},
            )
            raise DirectoryUnavailable("user.batch_get_id") from exc
        out: dict[str, str | None] = {}
        for email in emails:
            out[email] = found.get(email.lower())
        for mobile in mobiles:
            out[mobile] = found.get(_normal_mobile(mobile))
        missing = [e for e in entries if out.get(e) is None]
        if missing:
            # Entries are admin configuration (not secrets); name them so typos get fixed.
            log.warning(
                "feishu users not found (outside the app's availability or contact range?)",
                extra={"entries": missing},
            )
        return out

    def cached_only(self) -> CachedFeishuDirectory:
        """These lookups answered from fresh cache entries only (``CachedLookups``): the
        click's pre-check may judge with them on the toast's path, never waiting for
        Feishu; a miss raises ``DirectoryUnavailable`` and the click is decided later."""
        return CachedFeishuDirectory(self._resolved, self._chats)

    async def group_members(self, group_id: str) -> set[str]:
        """Feishu has no user groups askhuman can use; approvers list users or chats."""
        return set()

    async def chat_members(self, chat_id: str) -> set[str]:
        """Members of a chat the bot is in, cached for ``chat_ttl_seconds``; after that a
        failed lookup raises ``DirectoryUnavailable`` (the old list is never reused)."""
        return set(await self._chats.get(chat_id, lambda: self._load_chat(chat_id)))

    async def _load_chat(self, chat_id: str) -> frozenset[str]:
        try:
            return frozenset(await self._api.chat_member_open_ids(chat_id))
        except FeishuApiError as exc:
            log.warning(
                "could not list feishu chat members; refusing until Feishu answers again",
                extra={"chat_id": chat_id, "code": exc.code, "status": exc.status},
            )
            raise DirectoryUnavailable("chat_members.get") from exc


class CachedFeishuDirectory:
    """``FeishuDirectory`` without the network: fresh cache hits, else
    ``DirectoryUnavailable`` (never a stale answer, never a call to Feishu)."""

    def __init__(self, resolved: TtlCache[str | None], chats: TtlCache[frozenset[str]]) -> None:
        self._resolved = resolved
        self._chats = chats

    async def resolve_users(self, users: list[str]) -> set[str]:
        out = set()
        for entry in users:
            if entry_kind(entry) == "id":
                out.add(entry)
                continue
            hit = self._resolved.peek(entry)
            if hit is None:
                raise DirectoryUnavailable(f"{entry} not cached")
            if hit[1] is not None:
                out.add(hit[1])
        return out

    async def group_members(self, group_id: str) -> set[str]:
        return set()

    async def chat_members(self, chat_id: str) -> set[str]:
        hit = self._chats.peek(chat_id)
        if hit is None:
            raise DirectoryUnavailable(f"{chat_id} not cached")
        return set(hit[1])


def _normal_mobile(value: str) -> str:
    return value.replace(" ", "").replace("-", "")
