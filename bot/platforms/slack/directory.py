"""Who is in which Slack user group or channel, who an email is, and which org we are.

The engine asks on every click, and twenty people may click at once, so lookups are
cached with a TTL and concurrent misses for the same key share one API call
(``bot.platforms.directory_cache``). A failed lookup is never papered over with an
expired answer: it raises ``DirectoryUnavailable`` and the engine refuses with "I can't
verify your membership right now", so a person removed from a channel cannot keep
approving while Slack rate limits us. Definitive answers ("no such group", "no user
with that email") are answers, cached like any other.
"""

from __future__ import annotations

import logging
import math
import re
import time

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.engine.ports import DirectoryUnavailable, Identity
from bot.platforms.directory_cache import Clock, TtlCache
from bot.platforms.slack.client import error_code

log = logging.getLogger(__name__)

_USER_ID = re.compile(r"^[UW][A-Z0-9]+$")
_MENTION = re.compile(r"^<@([UW][A-Z0-9]+)(?:\|[^>]*)?>$")
_EMAIL = re.compile(r"^[^@\s<>]+@[^@\s<>]+$")
NO_SUCH_GROUP = frozenset({"no_such_subteam", "subteam_not_found"})
NO_SUCH_USER = frozenset({"users_not_found", "user_not_found"})


class SlackDirectory:
    """``Directory`` for Slack: user ids and emails, usergroup and channel members, and
    the installing team (``home_org``) that tells Slack Connect guests apart."""

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        ttl_seconds: float = 60.0,
        resolve_ttl_seconds: float = 600.0,
        clock: Clock = time.monotonic,
    ) -> None:
        self._client = client
        self.clock = clock
        """Monotonic seconds; tests replace it to expire the caches."""
        now = self._now
        self._groups: TtlCache[frozenset[str]] = TtlCache(ttl_seconds, now)
        self._channels: TtlCache[frozenset[str]] = TtlCache(ttl_seconds, now)
        self._emails: TtlCache[str | None] = TtlCache(resolve_ttl_seconds, now)
        self._org: TtlCache[tuple[str, str | None]] = TtlCache(math.inf, now)
        self._user_orgs: TtlCache[tuple[str | None, str | None]] = TtlCache(
            resolve_ttl_seconds, now)
        self._names: dict[str, str] = {}

    def _now(self) -> float:
        return self.clock()

    async def resolve_users(self, users: list[str]) -> set[str]:
        """Configured users: Slack ids (``U…``/``W…``, or ``<@U…>``) or emails
        (``users.lookupByEmail``, needs users:read.email); anything else is ignored."""
        resolved: set[str] = set()
        failed = False
        for entry in users:
            entry = entry.strip()
            match = _MENTION.match(entry)
            if match:
                entry = match.group(1)
            if _USER_ID.match(entry):
                resolved.add(entry)
            elif _EMAIL.match(entry):
                try:
                    found = await self._email(entry)
                except DirectoryUnavailable:
                    failed = True
                    continue
                if found:
                    resolved.add(found)
            else:
                log.warning(
                    "slack user entry is neither a user id nor an email; ignored",
                    extra={"platform": "slack", "entry": entry[:64]},
                )
        if failed:
            raise DirectoryUnavailable("users.lookupByEmail")
        return resolved

    async def group_members(self, group_id: str) -> set[str]:
        """Members of a user group (``usergroups.users.list``, needs usergroups:read)."""
        return set(await self._groups.get(group_id, lambda: self._load_group(group_id)))

    async def chat_members(self, chat_id: str) -> set[str]:
        """Members of a channel (``conversations.members``, paginated)."""
        return set(await self._channels.get(chat_id, lambda: self._load_channel(chat_id)))

    async def home_org(self) -> tuple[str, str | None]:
        """``(team_id, enterprise_id)`` of the installing workspace (``auth.test``, asked
        once and kept: a bot token belongs to one install)."""
        return await self._org.get("auth", self._load_org)

    async def is_external(self, identity: Identity) -> bool:
        """True when ``identity`` belongs to another organisation (a Slack Connect guest).

        Same workspace, or another workspace of the same Enterprise Grid org, is home.
        The person's team comes from the payload (``user.team_id`` of a click) or, when
        the payload has none (slash commands), from ``users.info``.
        """
        team, enterprise = await self.home_org()
        theirs = (identity.team, identity.enterprise)
        if identity.team is None:
            theirs = await self._user_orgs.get(identity.user_id,
                                               lambda: self._load_user_org(identity.user_id))
        if theirs[0] == team:
            return False
        return enterprise is None or enterprise not in theirs

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
        """Forget cached memberships and emails (e.g. after a settings reload)."""
        self._groups.clear()
        self._channels.clear()
        self._emails.clear()

    async def _email(self, email: str) -> str | None:
        return await self._emails.get(email.lower(), lambda: self._by_email(email))

    async def _by_email(self, email: str) -> str | None:
        try:
            response = await self._client.users_lookupByEmail(email=email)
        except SlackApiError as exc:
            if error_code(exc) in NO_SUCH_USER:
                log.warning("no slack user has this configured email",
                            extra={"platform": "slack", "entry": email[:64]})
                return None
            raise self._failed("users.lookupByEmail", exc, entry=email[:64]) from exc
        except SlackClientError as exc:
            raise self._failed("users.lookupByEmail", exc, entry=email[:64]) from exc
        user = response.get("user") or {}
        return str(user["id"]) if user.get("id") else None

    async def _load_group(self, group_id: str) -> frozenset[str]:
        try:
            response = await self._client.usergroups_users_list(usergroup=group_id)
        except SlackApiError as exc:
            if error_code(exc) in NO_SUCH_GROUP:
                log.warning("configured slack user group does not exist",
                            extra={"platform": "slack", "group": group_id})
                return frozenset()
            raise self._failed("usergroups.users.list", exc, group=group_id) from exc
        except SlackClientError as exc:
            raise self._failed("usergroups.users.list", exc, group=group_id) from exc
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
            raise self._failed("conversations.members", exc, channel=channel_id) from exc
        return frozenset(members)

    async def _load_user_org(self, user_id: str) -> tuple[str | None, str | None]:
        try:
            response = await self._client.users_info(user=user_id)
        except (SlackApiError, SlackClientError) as exc:
            raise self._failed("users.info", exc, user=user_id) from exc
        user = response.get("user") or {}
        grid = user.get("enterprise_user") or {}
        team, enterprise = user.get("team_id"), grid.get("enterprise_id")
        return (str(team) if team else None, str(enterprise) if enterprise else None)

    async def _load_org(self) -> tuple[str, str | None]:
        try:
            response = await self._client.auth_test()
        except (SlackApiError, SlackClientError) as exc:
            raise self._failed("auth.test", exc) from exc
        team = response.get("team_id")
        if not team:
            raise DirectoryUnavailable("auth.test returned no team_id")
        enterprise = response.get("enterprise_id")
        return str(team), str(enterprise) if enterprise else None

    @staticmethod
    def _failed(method: str, exc: BaseException, **extra: str) -> DirectoryUnavailable:
        log.warning(
            f"{method} failed; refusing until Slack answers again",
            extra={"platform": "slack", "error": error_code(exc), **extra},
        )
        return DirectoryUnavailable(method)
