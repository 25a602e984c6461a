"""``KeptReads``: the connection and session a thread's lookups reuse, on a SQLite file.

A lookup (``Database.read``) checked a connection out of the pool, set it up for a
deferred ``BEGIN``, built a ``Session`` around it, and handed both back afterwards:
about 55 µs of SQLAlchemy per lookup on top of the query, and the engine reads on
the event loop several times per decision (``Committer.read``). A thread that reads
often keeps one connection and one session instead; each lookup still begins its own
snapshot and rolls it back, so what it sees and what it may write are unchanged.

Only for a SQLite file: its connections are local and cheap to hold. A lookup inside
another lookup of the same thread, a forked child (the parent's connection is not
its own) and a lookup after an error get a connection of their own, as before.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session


@dataclass
class _Kept:
    connection: Connection
    session: Session
    pid: int
    busy: bool = False


class KeptReads:
    """One kept connection and session per thread, for ``engine``'s lookups."""

    def __init__(self, engine: Engine, options: dict[str, object]) -> None:
        self._engine = engine
        self._options = options  # set once on each kept connection (``READ_ONLY``)
        self._local = threading.local()
        self._all: list[_Kept] = []  # every kept pair of this process, for ``close``
        self._lock = threading.Lock()

    @contextmanager
    def session(self) -> Iterator[Session | None]:
        """This thread's kept session inside a fresh snapshot, or None when it is in
        use already (a nested lookup) and the caller must open a connection itself."""
        kept = self._take()
        if kept is None:
            yield None
            return
        kept.busy = True
        try:
            kept.session.begin()
            try:
                yield kept.session
            finally:
                kept.session.expunge_all()  # keep loaded rows usable after the rollback
                kept.session.rollback()
        except BaseException:
            self._forget(kept)  # a broken connection must not serve the next lookup
            raise
        finally:
            kept.busy = False

    def close(self) -> None:
        """Close every kept connection of this process (``Database.dispose``)."""
        with self._lock:
            kept, self._all = self._all, []
        self._local = threading.local()
        for pair in kept:
            if pair.pid == os.getpid():
                self._close(pair)

    def _take(self) -> _Kept | None:
        kept: _Kept | None = getattr(self._local, "kept", None)
        if kept is not None and kept.pid == os.getpid():
            return None if kept.busy else kept
        connection = self._engine.connect()
        connection.execution_options(**self._options)
        kept = _Kept(connection, Session(bind=connection, expire_on_commit=False), os.getpid())
        self._local.kept = kept
        with self._lock:
            self._all.append(kept)
        return kept

    def _forget(self, kept: _Kept) -> None:
        if getattr(self._local, "kept", None) is kept:
            self._local.kept = None
        with self._lock:
            if kept in self._all:
                self._all.remove(kept)
        self._close(kept)

    @staticmethod
    def _close(kept: _Kept) -> None:
        with suppress(Exception):  # closing what may already be broken
            kept.session.close()
        with suppress(Exception):
            kept.connection.close()
