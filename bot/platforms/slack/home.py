"""Slack App Home: each person's pending requests (with working buttons), the standing
grants they may revoke, and their runs.

``app_home_opened`` publishes the view (``views.publish``) for that person and
remembers them as a *watcher* for ``WATCH_SECONDS``. Any card change this process
makes (a delivery, an update, a run result: ``SlackAdapter`` calls ``changed``)
schedules one debounced refresh of the watchers, at most ``MAX_WATCHERS`` of the most
recent; a view identical to the last one published is not sent again. So the cost is
bounded by the people who actually look at Home, not by the number of users.

Home is a convenience, never the record: a refresh that fails is logged and dropped
(the next change or the next open publishes again).

Replicas: a person is watched by the replica that saw their latest open. Changes
made on any replica reach it through the engine's ``HomeSignals`` (PostgreSQL
``LISTEN/NOTIFY``), and an open announced by another replica ends this one's watch
of that person, so each change publishes a person's Home once (the bound and the
SQLite behaviour are in ``bot.engine.home_signals``).

Slack's Home has no ephemeral messages and no ``response_url``, so a click on Home
that is refused is told by republishing Home with the reason on top (``notice``).
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import logging
import time
from collections.abc import Callable
from typing import Protocol

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.engine.home_signals import HomeSignals, Watch
from bot.engine.ports import Identity
from bot.engine.results import GrantView, PendingPage
from bot.platforms.grant_lines import grant_lines
from bot.platforms.slack.client import error_code
from bot.platforms.slack.people import people
from bot.platforms.slack.replies import safe_text
from bot.settings import Settings
from renderers.card import RunLine
from renderers.home import home_view
from renderers.words import Said

log = logging.getLogger(__name__)

PLATFORM = "slack"

WATCH_SECONDS = 8 * 3600.0
MAX_WATCHERS = 200
DEBOUNCE_SECONDS = 2.0
"""A quiet moment before a refresh round: a burst of changes costs one round."""
PER_HOME = 20
"""Pending requests read per view (``home_view`` shows as many whole cards as fit)."""


class HomeEngine(Protocol):
    async def pending_page(
        self, identity: Identity, page: int = 1, per_page: int = 10
    ) -> PendingPage: ...

    async def runs_started_by(self, identity: Identity, limit: int = 10) -> list[RunLine]: ...

    @property
    def settings(self) -> Settings: ...

    async def active_grants(self, who: Identity) -> list[GrantView]: ...


class HomeTab:
    """Publishes and refreshes App Home views for the people who look at them."""

    def __init__(
        self, engine: HomeEngine, client: AsyncWebClient, *,
        debounce: float = DEBOUNCE_SECONDS, clock: Callable[[], float] = time.monotonic,
        signals: HomeSignals | None = None,
    ) -> None:
        self._engine = engine
        self._client = client
        self._debounce = debounce
        self._clock = clock
        self._watchers: collections.OrderedDict[str, float] = collections.OrderedDict()
        self._published: dict[str, str] = {}
        self._people = people(client)
        self._pending: asyncio.Task[None] | None = None
        self._dirty = False
        self._signals = signals
        self._opens: dict[str, Watch] = {}
        """This replica's latest open per watcher, as announced to the others."""
        if signals is not None:
            signals.subscribe(self.changed, self.watched_elsewhere)

    # ---------------------------------------------------------------- events

    async def opened(self, user_id: str) -> None:
        """The person opened the Home tab: publish it and watch for changes."""
        self._watchers[user_id] = self._clock()
        self._watchers.move_to_end(user_id)
        if self._signals is not None:
            self._opens[user_id] = self._signals.watching(PLATFORM, user_id)
        while len(self._watchers) > MAX_WATCHERS:
            old, _ = self._watchers.popitem(last=False)
            self._forget(old)
        await self.publish(user_id, force=True)

    def watched_elsewhere(self, watch: Watch) -> None:
        """Another replica saw ``watch.user`` open Home: stop watching them here,
        unless the open seen here is the later one."""
        mine = self._opens.get(watch.user)
        if watch.platform != PLATFORM or watch.user not in self._watchers:
            return
        if mine is None or watch.beats(mine.at, mine.instance):
            self._watchers.pop(watch.user, None)
            self._forget(watch.user)

    def _forget(self, user_id: str) -> None:
        self._published.pop(user_id, None)
        self._opens.pop(user_id, None)

    def changed(self) -> None:
        """Something a watcher may see changed: refresh them soon, once per burst."""
        if not self._watchers:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._dirty = True
        if self._pending is None or self._pending.done():
            self._pending = loop.create_task(self._refresh_loop())

    def announce_change(self) -> None:
        """A change made here that watchers on every replica may see (a grant revoked
        from a list): through ``HomeSignals`` when there are replicas to tell."""
        if self._signals is not None:
            self._signals.changed()
        else:
            self.changed()

    def watching(self, user_id: str) -> bool:
        opened = self._watchers.get(user_id)
        return opened is not None and self._clock() - opened < WATCH_SECONDS

    async def drain(self) -> None:
        """Wait for a scheduled refresh (tests, shutdown)."""
        if self._pending is not None:
            await asyncio.gather(self._pending, return_exceptions=True)

    # ---------------------------------------------------------------- publishing

    async def publish(self, user_id: str, *, notice: Said | None = None,
                      force: bool = False, ok: bool = False) -> bool:
        """Render and publish one person's Home; False if Slack or the database failed.
        ``notice`` (a refusal of a click on Home; with ``ok``, a click's success) goes
        on top, in their locale."""
        who = Identity("slack", user_id)
        try:
            page = await self._engine.pending_page(who, 1, PER_HOME)
            runs = await self._engine.runs_started_by(who)
            locale, zone = await self._people.person(user_id)
            grants = grant_lines(await self._engine.active_grants(who),
                                 self._engine.settings, zone)
            shown = safe_text(notice.text(locale)) if notice is not None else None
            view = home_view(page.cards, page.total, runs, locale=locale, timezone=zone,
                             notice=shown, notice_ok=ok, grants=grants,
                             routes=page.routes)
        except Exception:
            log.exception("could not build the app home", extra={"platform": "slack"})
            return False
        digest = hashlib.sha256(json.dumps(view, sort_keys=True).encode()).hexdigest()
        if not force and notice is None and self._published.get(user_id) == digest:
            return True
        try:
            await self._client.views_publish(user_id=user_id, view=view)
        except (SlackApiError, SlackClientError, OSError, TimeoutError) as exc:
            log.warning("views.publish failed",
                        extra={"platform": "slack", "user": user_id, "error": error_code(exc)})
            return False
        self._published[user_id] = digest if notice is None else ""
        return True

    async def _refresh_loop(self) -> None:
        """Refresh every live watcher after a quiet ``debounce``; again if something
        changed meanwhile."""
        while self._dirty:
            self._dirty = False
            await asyncio.sleep(self._debounce)
            now = self._clock()
            for user_id, opened in list(self._watchers.items()):
                if now - opened >= WATCH_SECONDS:
                    self._watchers.pop(user_id, None)
                    self._forget(user_id)
                    continue
                if user_id not in self._watchers:  # watched elsewhere since
                    continue
                await self.publish(user_id)
