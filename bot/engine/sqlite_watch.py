"""Hear other processes' commits on a SQLite file, which has no LISTEN/NOTIFY.

When several processes share one file (``serve --no-background`` beside ``askhuman
worker``, ``serve --workers N``), a decision committed in one must wake the resume
loop and the long-polls of the others, as ``NOTIFY`` does on PostgreSQL
(``waiters.listen_forever``). Without it a worker found a web process's resume at its
next poll (every 2 s) and a long-poll re-read its request once a second.

``PRAGMA data_version`` on a connection of our own changes whenever another connection
commits to the file, and reading it reads the WAL index in shared memory (~4 µs, no
disk). So each process checks it every ``interval`` seconds and, when it moved:

- announces to the ``Waiters``' subscribers (the resume loop claims what is due;
  a claim that finds nothing costs one query);
- wakes the long-polls whose requests are no longer open, found with one query over
  the refs being waited for (not every waiter re-reading its own).

The process's own commits move it too (they come from other connections); those
wake-ups find nothing new and cost a query at most ``1 / interval`` times a second.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Awaitable, Callable

from bot.engine.waiters import Waiters

log = logging.getLogger("askhuman.engine.sqlite_watch")

Decided = Callable[[list[str]], Awaitable[list[str]]]
"""Of the refs given, those no longer open (read from the database)."""


class DataVersion:
    """``PRAGMA data_version`` of one SQLite file, read on a connection of its own."""

    def __init__(self, path: str) -> None:
        # timeout=0: a read that would wait (a checkpoint in progress) counts as a change
        self._conn = sqlite3.connect(path, timeout=0, isolation_level=None,
                                     check_same_thread=False)
        self._last = self._read()

    def _read(self) -> int | None:
        try:
            row = self._conn.execute("PRAGMA data_version").fetchone()
        except sqlite3.OperationalError:
            return None
        return int(row[0])

    def moved(self) -> bool:
        """Whether another connection committed since the last call (or it could not
        be read, which is treated as a change: a spare wake-up costs one query)."""
        now = self._read()
        changed = now is None or now != self._last
        self._last = now
        return changed

    def close(self) -> None:
        self._conn.close()


async def watch_forever(path: str, waiters: Waiters, decided: Decided,
                        stop: asyncio.Event, interval: float) -> None:
    """Until ``stop``: every ``interval`` seconds, if the file changed, wake this
    process's resume loop and the long-polls whose requests were decided."""
    if waiters.listening:  # the engine's loops and the API both ask; one is enough
        await stop.wait()
        return
    waiters.listening = True
    version = DataVersion(path)
    try:
        while not stop.is_set():
            await asyncio.sleep(interval)  # cheaper than a timed wait on ``stop``
            if stop.is_set() or not version.moved():
                continue
            waiters.announce()
            await _wake_decided(waiters, decided)
    finally:
        version.close()
        waiters.listening = False


async def _wake_decided(waiters: Waiters, decided: Decided) -> None:
    refs = waiters.waiting()
    if not refs:
        return
    try:
        found = await decided(refs)
    except Exception as exc:  # the long-polls' own recheck still bounds them
        log.warning("could not read which waited-for requests were decided",
                    extra={"error": type(exc).__name__})
        return
    waiters.wake(found, announce=False)
