"""Tell every replica that people's home views may have changed, and who watches whom.

A platform's home view (Slack App Home) is kept fresh by the process that published
it (its *watcher* of that person). A change that a watcher may see (a card posted or
updated, a run's result) is made by whichever replica's outbox did it; ``changed``
tells this replica's watchers at once and, on PostgreSQL, every other replica with
``NOTIFY askhuman_home`` (the change has committed before the platform call that
reports it, so a replica that reads on the notification sees it). The long-poll
listener (``waiters.listen_forever``, one connection per replica) hears it.

So that one change publishes a person's view once, not once per replica that ever
saw them open it, ``watching`` announces a new open: any other replica watching the
same person stops, unless its own open was later (the most recent open wins; equal
times go to the larger instance id, so exactly one keeps the person). A lost
notification (the listener reconnecting) can leave two watchers for a while: that
person's view is then published at most once per replica per change. After a
reconnect every watcher is refreshed once, since changes may have been missed.

SQLite has no notifications: signals stay in the process (several processes on one
file refresh only the views they watch for the changes they make themselves).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import text

from storage import Database

log = logging.getLogger("askhuman.engine.home_signals")

CHANNEL = "askhuman_home"
CHANGE: dict[str, object] = {"c": 1}
GATHER_SECONDS = 0.1
"""How long a notification waits for others to share its round trip. Every card
posted or updated is a change, so under load each decision sent one of its own (a
transaction on a thread, ~1 ms of CPU on PostgreSQL); a watcher refreshes a home view
at most every 2 s anyway (``HomeTab``), so 0.1 s later changes nothing a person sees."""


@dataclass(frozen=True)
class Watch:
    """Replica ``instance`` started watching ``user`` on ``platform`` at ``at``
    (epoch seconds)."""

    platform: str
    user: str
    at: float
    instance: str

    def beats(self, at: float, instance: str) -> bool:
        """Whether this open is the newer one (ties: the larger instance id)."""
        return (self.at, self.instance) > (at, instance)


OnChange = Callable[[], None]
OnWatch = Callable[[Watch], None]


class HomeSignals:
    """This replica's end of the ``askhuman_home`` channel."""

    def __init__(self, database: Database) -> None:
        self.instance = uuid.uuid4().hex
        self._db = database
        self._subscribers: list[tuple[OnChange, OnWatch]] = []
        self._outgoing: list[dict[str, object]] = []
        self._sender: asyncio.Task[None] | None = None
        self.gather_seconds = GATHER_SECONDS
        self.sent = 0
        """Notifications sent (tests, metrics)."""

    def subscribe(self, on_change: OnChange, on_watch: OnWatch) -> Callable[[], None]:
        """Hear changes and other replicas' opens (on the listener's event loop)."""
        entry = (on_change, on_watch)
        self._subscribers.append(entry)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(entry)

        return unsubscribe

    def changed(self) -> None:
        """A change a watcher may see has committed here: refresh this replica's
        watchers now and tell the others (one notification per ``GATHER_SECONDS``)."""
        self._tell_local(None)
        if CHANGE not in self._outgoing:
            self._send(CHANGE)

    def watching(self, platform: str, user: str) -> Watch:
        """This replica now watches ``user``: the others stop (see the module doc)."""
        watch = Watch(platform, user, time.time(), self.instance)
        self._send({"w": [platform, user, watch.at]})
        return watch

    def heard(self, payload: str) -> None:
        """A notification from any replica (ours included); ``""`` after the listener
        reconnected: notifications may have been lost, so everyone refreshes."""
        if not payload:
            self._tell_local(None)
            return
        try:
            data = json.loads(payload)
            sender = str(data["i"])
            if sender == self.instance:
                return
            watch = (Watch(str(data["w"][0]), str(data["w"][1]), float(data["w"][2]), sender)
                     if "w" in data else None)
        except (ValueError, KeyError, TypeError, IndexError):
            log.warning("ignored a malformed home notification")
            return
        self._tell_local(watch)

    def _tell_local(self, watch: Watch | None) -> None:
        for on_change, on_watch in list(self._subscribers):
            try:
                on_change() if watch is None else on_watch(watch)
            except Exception:  # a home view is a convenience; never fail the caller
                log.exception("a home subscriber failed")

    # ------------------------------------------------------------------ sending

    def _send(self, body: dict[str, object]) -> None:
        if not self._db.is_postgres:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._outgoing.append(body)
        if self._sender is None or self._sender.done():
            self._sender = loop.create_task(self._flush())

    async def _flush(self) -> None:
        """Send what is queued, a batch per round trip, until nothing is left."""
        while self._outgoing:
            await asyncio.sleep(self.gather_seconds)  # let a burst's changes join
            batch, self._outgoing = self._outgoing, []
            payloads = [json.dumps({**body, "i": self.instance}, separators=(",", ":"))
                        for body in batch]
            try:
                await asyncio.to_thread(self._notify, payloads)
                self.sent += len(payloads)
            except Exception as exc:
                log.warning("could not tell other replicas about a home change",
                            extra={"error": type(exc).__name__})

    def _notify(self, payloads: list[str]) -> None:
        with self._db.transaction() as session:
            session.execute(
                text("SELECT pg_notify(:channel, p) FROM unnest(CAST(:payloads AS text[])) p"),
                {"channel": CHANNEL, "payloads": payloads})

    async def drain(self) -> None:
        """Wait for queued notifications to be sent (tests, shutdown)."""
        if self._sender is not None:
            await asyncio.gather(self._sender, return_exceptions=True)
