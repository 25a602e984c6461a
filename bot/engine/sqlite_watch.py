"""Hear other processes' commits on a SQLite file, which has no LISTEN/NOTIFY.

When several processes share one file (``serve --no-background`` beside ``askhuman
worker``, ``serve --workers N``), a decision committed in one must wake the resume
loop and the long-polls of the others, as ``NOTIFY`` does on PostgreSQL
(``waiters.listen_forever``). Without it a worker found a web process's resume at its
next poll (every 2 s) and a long-poll re-read its request once a second.

``PRAGMA data_version`` on a connection of our own changes whenever another connection
commits to the file, and reading it reads the WAL index in shared memory (5–70 µs, no
disk). So each process checks it every ``interval`` seconds (four times less often
after a second in which the checks found nothing to do) and, when it moved:

- in a process that runs resumes others queue (``askhuman worker``), if a resume job
  is queued and due (one read), announces to the ``Waiters``' subscribers: the resume
  loop claims it;
- wakes the long-polls whose requests are no longer open, found with one query over
  the refs being waited for (not every waiter re-reading its own).

The process's own commits move it too (they come from other connections), so under
load it moves at every check. Hence the reads: the loop is woken only for a resume to
claim, and only where resumes come from elsewhere (a process that takes events in and
runs its loops resumes its own decisions); the long-polls' read runs only while some
wait. The checks themselves slow down while nothing happens (``pause``).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Awaitable, Callable

from bot.engine.waiters import Waiters

log = logging.getLogger("askhuman.engine.sqlite_watch")

QUIET_AFTER = 1.0
"""Seconds without finding work after which the watch slows down (``pause``)."""
SLOW_DOWN = 4
"""How many times longer a quiet watch waits between checks."""

Decided = Callable[[list[str]], Awaitable[list[str]]]
"""Of the refs given, those no longer open (read from the database)."""
Resumable = Callable[[], Awaitable[bool]]
"""Whether a resume job is queued and due (read from the database)."""


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
        except sqlite3.Error:  # locked for a moment (a checkpoint), or the disk: retried
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
                        resumable: Resumable | None, stop: asyncio.Event,
                        interval: float) -> None:
    """Until ``stop``: every ``interval`` seconds, if the file changed, wake this
    process's resume loop if a resume waits (with ``resumable``), and the long-polls
    whose requests were decided."""
    if waiters.listening:  # the engine's loops and the API both ask; one is enough
        await stop.wait()
        return
    waiters.listening = True
    version = DataVersion(path)
    clock = asyncio.get_running_loop().time
    found_at, moved = clock(), False
    try:
        while not stop.is_set():
            wanted = resumable is not None or bool(waiters.waiting())
            quiet_for = 0.0 if moved else clock() - found_at
            await asyncio.sleep(pause(interval, quiet_for, wanted))
            moved = version.moved()
            if stop.is_set() or not moved:
                continue
            found = resumable is not None and await _announce_resumes(waiters, resumable)
            if await _wake_decided(waiters, decided) or found:
                found_at = clock()
    finally:
        version.close()
        waiters.listening = False


def pause(interval: float, quiet_for: float, wanted: bool) -> float:
    """The next check's delay: ``interval`` while checks find work (a resume to claim,
    a long-poll to wake) and someone here cares, and right after a commit (a stored
    click comes a moment before its decision); ``SLOW_DOWN`` times longer after
    ``QUIET_AFTER`` seconds without work (every process's heartbeat commits each
    second, so commits alone never fall quiet), or while nobody here waits. Each
    wake-up costs CPU (0.2–0.35 ms on the 2-core test machine), so a quiet process does
    a quarter of them; the first decision after a quiet spell is heard within
    ``SLOW_DOWN * interval``."""
    return interval if wanted and quiet_for < QUIET_AFTER else interval * SLOW_DOWN


async def _announce_resumes(waiters: Waiters, resumable: Resumable) -> bool:
    """Wake the resume loop if a resume is due; whether one was."""
    try:
        due = await resumable()
    except Exception as exc:  # the resume loop's own poll still finds it
        log.warning("could not read whether a resume is due", extra={"error": type(exc).__name__})
        return False
    if due:
        waiters.announce()
    return due


async def _wake_decided(waiters: Waiters, decided: Decided) -> bool:
    """Wake the long-polls whose requests were decided; whether there were any."""
    refs = waiters.waiting()
    if not refs:
        return False
    try:
        found = await decided(refs)
    except Exception as exc:  # the long-polls' own recheck still bounds them
        log.warning("could not read which waited-for requests were decided",
                    extra={"error": type(exc).__name__})
        return False
    waiters.wake(found, announce=False)
    return bool(found)
