"""Wake whoever waits for a request's outcome the moment its resolution commits.

Long-polling callers (``GET /api/v1/requests/{ref}?wait=N``, MCP ``ask_human``) must
not poll the database. ``store.resolve`` marks the ref on its session (``mark``); the
engine's transaction helper takes the marks before committing (``taken``) and, on
PostgreSQL, sends ``NOTIFY askhuman_resolved, '<ref>'`` inside that same transaction,
so other replicas hear of a decision exactly when (and only if) it commits. After the
commit, the local ``Waiters`` are woken directly; ``listen_forever`` (one connection per
replica) wakes them for decisions made elsewhere; it also LISTENs on the channels
other services add (``on_channel``: home views, ``home_signals``). On a SQLite file
shared by several processes, ``sqlite_watch`` does the listener's part.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

log = logging.getLogger("askhuman.engine.waiters")

CHANNEL = "askhuman_resolved"
RESOLVED_KEY = "askhuman.resolved"
"""``Session.info`` key listing the refs resolved in the current transaction."""


def mark(session: Session, ref: str) -> None:
    """Remember that ``ref`` was resolved in this session's transaction."""
    session.info.setdefault(RESOLVED_KEY, []).append(ref)


def taken(session: Session, postgres: bool) -> list[str]:
    """The refs resolved in this transaction; on PostgreSQL also NOTIFY them (sent on
    commit only, so a rolled-back decision wakes nobody)."""
    refs: list[str] = session.info.pop(RESOLVED_KEY, [])
    if postgres and len(refs) == 1:
        session.execute(text("SELECT pg_notify(:channel, :ref)"),
                        {"channel": CHANNEL, "ref": refs[0]})
    elif postgres and refs:  # a timeout sweep's chunk: one statement, not one per ref
        session.execute(text("SELECT pg_notify(:channel, r) FROM unnest(CAST(:refs AS text[])) r"),
                        {"channel": CHANNEL, "refs": refs})
    return refs


class Waiters:
    """Futures waiting for refs, woken from any thread or event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_ref: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]] = {}
        self._subscribers: list[tuple[asyncio.AbstractEventLoop, Callable[[], None]]] = []
        self.listening = False
        """Whether ``listen_forever`` runs for these waiters (one connection is enough)."""
        self.channels: dict[str, Callable[[str], None]] = {}
        """More channels ``listen_forever`` LISTENs on, and who hears their payloads."""

    def on_channel(self, channel: str, handler: Callable[[str], None]) -> None:
        """Also LISTEN on ``channel`` (set before the listener starts): ``handler`` gets
        each payload on the listener's loop, and ``""`` after every (re)connect, because
        notifications sent while the connection was down are lost."""
        self.channels[channel] = handler

    def subscribe(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (on the current loop) whenever a resolution is announced:
        one committed on another replica (``listen_forever``; this process's own commits
        wake its loops through the ``Committer``'s hook): the resume loop wakes on it
        instead of polling. Returns the function that unsubscribes."""
        entry = (asyncio.get_running_loop(), callback)
        with self._lock:
            self._subscribers.append(entry)

        def unsubscribe() -> None:
            with self._lock, contextlib.suppress(ValueError):
                self._subscribers.remove(entry)

        return unsubscribe

    def register(self, ref: str) -> asyncio.Future[None]:
        """A future set when ``ref`` is announced; ``discard`` it when done waiting.

        Register *before* checking the database, so a decision committed between the
        check and the wait still wakes the caller.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            self._by_ref.setdefault(ref, set()).add((loop, future))
        return future

    def discard(self, ref: str, future: asyncio.Future[None]) -> None:
        with self._lock:
            entries = self._by_ref.get(ref)
            if entries is None:
                return
            entries.discard((future.get_loop(), future))
            if not entries:
                del self._by_ref[ref]

    def wake(self, refs: Iterable[str], *, announce: bool = True) -> None:
        """Wake every waiter of ``refs`` and, with ``announce``, every subscriber
        (thread-safe). This process's own commits do not announce: the ``Committer``'s
        hook already wakes the loops their commit queued work for (``Committed``), and a
        timeout sweep's full chunks must wake none of them (``expiry.sweep_chunk``)."""
        refs = list(refs)
        if refs and announce:
            self.announce()
        with self._lock:  # once, not once per ref: a timeout sweep wakes 1,000 at a time
            found = [self._by_ref.pop(ref) for ref in refs if ref in self._by_ref]
        for entries in found:
            for loop, future in entries:
                with contextlib.suppress(RuntimeError):  # its loop is closed
                    loop.call_soon_threadsafe(_settle, future)

    def announce(self) -> None:
        """Call every subscriber (thread-safe): something was decided elsewhere."""
        with self._lock:
            subscribers = list(self._subscribers)
        for loop, callback in subscribers:
            with contextlib.suppress(RuntimeError):  # its loop is closed
                loop.call_soon_threadsafe(callback)

    def waiting(self) -> list[str]:
        """The refs someone waits for."""
        with self._lock:
            return list(self._by_ref)

    def wake_all(self) -> None:
        """Wake everyone (they re-read the database): after missing notifications."""
        self.wake(self.waiting())

    def count(self) -> int:
        with self._lock:
            return sum(len(entries) for entries in self._by_ref.values())


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def libpq_url(sqlalchemy_url: str) -> str:
    """``postgresql+psycopg://…`` → ``postgresql://…`` for a raw psycopg connection."""
    url = make_url(sqlalchemy_url).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


async def listen_forever(
    database_url: str, waiters: Waiters, stop: asyncio.Event, retry_seconds: float = 1.0,
    ready: asyncio.Event | None = None,
) -> None:
    """LISTEN for resolutions on PostgreSQL and wake local waiters until ``stop``.

    After a (re)connect every waiter is woken once, because notifications sent while
    the connection was down are lost; they re-check the database and wait again.
    """
    import psycopg

    if waiters.listening:  # the engine's worker and the API both ask; one connection
        await stop.wait()
        return
    waiters.listening = True
    try:
        await _listen(psycopg, libpq_url(database_url), waiters, stop, retry_seconds, ready)
    finally:
        waiters.listening = False


async def _listen(
    psycopg: Any, url: str, waiters: Waiters, stop: asyncio.Event, retry_seconds: float,
    ready: asyncio.Event | None,
) -> None:
    while not stop.is_set():
        try:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                for channel in (CHANNEL, *waiters.channels):
                    await conn.execute(f"LISTEN {channel}")
                waiters.wake_all()
                _hand(waiters, None, "")
                if ready is not None:
                    ready.set()
                await _pump(conn, waiters, stop)
        except Exception as exc:
            log.warning("resolution listener disconnected; reconnecting",
                        extra={"error": type(exc).__name__})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), retry_seconds)


async def _pump(conn: object, waiters: Waiters, stop: asyncio.Event) -> None:
    """Forward notifications until ``stop`` (checked at least once a second)."""
    import psycopg

    assert isinstance(conn, psycopg.AsyncConnection)
    while not stop.is_set():
        async for notify in conn.notifies(timeout=1.0):
            if notify.channel == CHANNEL:
                waiters.wake([notify.payload])
            else:
                _hand(waiters, notify.channel, notify.payload)


def _hand(waiters: Waiters, channel: str | None, payload: str) -> None:
    """Give ``payload`` to the handler of ``channel`` (None: to every handler)."""
    for name, handler in list(waiters.channels.items()):
        if channel is None or name == channel:
            try:
                handler(payload)
            except Exception:
                log.exception("a notification handler failed", extra={"channel": name})
