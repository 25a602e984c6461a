"""Who is in which Slack user group or channel, for authorizing responders.

The engine asks on every click, and twenty people may click at once, so lookups are
cached with a TTL and concurrent misses for the same key share one API call. Errors
fail closed (empty membership) and are not cached, so a transient outage denies a
click instead of approving it, and the next click tries again.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.platforms.slack.client import error_code

log = logging.getLogger(__name__)

_USER_ID = re.compile(r"^[UW][A-Z0-9]+$")
_MENTION = re.compile(r"^<@([UW][A-Z0-9]+)(?:\|[^>]*)?>$")


class _TtlCache:
    """Async get-or-load with per-key single flight."""

    def __init__(self, ttl_seconds: float) -> None:
        self._ttl = ttl_seconds
        self._values: dict[str, tuple[float, frozenset[str]]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def get(self, key: str, load: Callable[[], Awaitable[frozenset[str]]]) -> frozenset[str]:
        hit = self._values.get(key)
        if hit is not None and time.monotonic() - hit[0] < self._ttl:
            return hit[1]
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            hit = self._values.get(key)
            if hit is not None and time.monotonic() - hit[0] < self._ttl:
                return hit[1]
            value = await load()
            self._values[key] = (time.monotonic(), value)
            return value

    def clear(self) -> None:
        self._values.clear()


class SlackDirectory:
    """``Directory`` for Slack: user ids, usergroup members, channel members."""

    def __init__(self, client: AsyncWebClient, *, ttl_seconds: float = 60.0) -> None:
        self._client = client
        self._groups = _TtlCache(ttl_seconds)
        self._channels = _TtlCache(ttl_seconds)
        self._names: dict[str, str] = {}

    async def resolve_users(self, users: list[str]) -> set[str]:
        """Configured users are Slack ids (``U…``/``W…``, or ``<@U…>``); others are ignored."""
        resolved: set[str] = set()
        for entry in users:
            entry = entry.strip()
            match = _MENTION.match(entry)
            if match:
                entry = match.group(1)
            if _USER_ID.match(entry):
                resolved.add(entry)
            else:
                log.warning(
                    "slack approver entry is not a user id; ignored",
                    extra={"platform": "slack", "entry": entry[:64]},
                )
        return resolved

    async def group_members(self, group_id: str) -> set[str]:
        """Members of a user group (``usergroups.users.list``, needs usergroups:read)."""
        try:
            return set(await self._groups.get(group_id, lambda: self._load_group(group_id)))
        except _LookupFailed:
            return set()

    async def chat_members(self, chat_id: str) -> set[str]:
        """Members of a channel (``conversations.members``, paginated)."""
        try:
            return set(await self._channels.get(chat_id, lambda: self._load_channel(chat_id)))
        except _LookupFailed:
            return set()

    async def display_name(self, user_id: str) -> str | None:
        """A person's display name via ``users.info`` (needs users:read), cached forever."""
        if user_id in self._names:
            return self._names[user_id]
        try:
            response = await self._client.users_info(user=user_id)
        except (SlackApiError, SlackClientError) as exc:
            log.info(
                "users.info failed",
                extra={"platform": "slack", "user": user_id, "error": error_code(exc)},
            )
            return None
        user = response.get("user") or {}
        profile = user.get("profile") or {}
        name = profile.get("display_name") or user.get("real_name") or user.get("name")
        if name:
            self._names[user_id] = str(name)
        return str(name) if name else None

    def invalidate(self) -> None:
        """Forget cached memberships (e.g. after a settings reload)."""
        self._groups.clear()
        self._channels.clear()

    async def _load_group(self, group_id: str) -> frozenset[str]:
        try:
            response = await self._client.usergroups_users_list(usergroup=group_id)
        except (SlackApiError, SlackClientError) as exc:
            log.warning(
                "usergroups.users.list failed; treating the group as empty",
                extra={"platform": "slack", "group": group_id, "error": error_code(exc)},
            )
            raise _LookupFailed from exc
        return frozenset(str(u) for u in response.get("users") or [])

    async def _load_channel(self, channel_id: str) -> frozenset[str]:
        members: set[str] = set()
        cursor: str | None = None
        try:
            while True:
                response = await self._client.conversations_members(
                    channel=channel_id, limit=200, cursor=cursor
                )
                members.update(str(m) for m in response.get("members") or [])
                cursor = (response.get("response_metadata") or {}).get("next_cursor") or None
                if not cursor:
                    break
        except (SlackApiError, SlackClientError) as exc:
            log.warning(
                "conversations.members failed; treating the channel as empty",
                extra={"platform": "slack", "channel": channel_id, "error": error_code(exc)},
            )
            raise _LookupFailed from exc
        return frozenset(members)


class _LookupFailed(Exception):
    """Internal: a membership lookup failed; never cached."""
