"""``KeptSessions``: the connection and session a thread reuses on a SQLite file.

Every lookup and every write transaction checked a connection out of the pool, built
a ``Session`` around it and handed both back afterwards: 55–75 µs of SQLAlchemy each,
on top of the statements, and a decision takes several of both (inside SQLite's write
lock, for the writes). A thread that works often keeps one connection and one session
instead. Each lookup still begins its own snapshot and rolls it back; each write
transaction still begins (``BEGIN IMMEDIATE``), commits or rolls back, and starts
with an empty ``session.info`` (where the engine notes what runs after a commit). So
what each one sees and does is unchanged.

Only for a SQLite file: its connections are local and cheap to hold. A session in use
already (a nested lookup or transaction), a forked child (the parent's connection is
not its own) and the next use after an error get a fresh connection, as before. A
thread that ended gives its pair back when another thread keeps one.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session


class WriteLockBusy(Exception):
    """A write that must not wait found SQLite's write lock taken."""


@dataclass
class _Kept:
    connection: Connection
    session: Session
    pid: int
    thread: threading.Thread = field(default_factory=threading.current_thread)
    busy: bool = False


class KeptSessions:
    """One kept connection and session per thread, for ``engine``."""

    def __init__(self, engine: Engine, options: dict[str, object] | None = None) -> None:
        self._engine = engine
        self._options = options or {}  # set once on each kept connection (``READ_ONLY``)
        self._local = threading.local()
        self._all: list[_Kept] = []  # every kept pair of this process, for ``close``
        self._lock = threading.Lock()

    @contextmanager
    def lookup(self) -> Iterator[Session | None]:
        """This thread's session in a fresh snapshot, always rolled back; None when it
        is in use already and the caller must open a session of its own."""
        with self._using() as kept:
            if kept is None:
                yield None
                return
            kept.session.begin()
            try:
                yield kept.session
            finally:
                kept.session.expunge_all()  # loaded rows stay usable after the rollback
                kept.session.rollback()

    @contextmanager
    def transaction(self) -> Iterator[Session | None]:
        """This thread's session in a new transaction: committed when the block ends,
        rolled back if it raises; None when in use already (as ``lookup``)."""
        with self._using() as kept:
            if kept is None:
                yield None
                return
            session = kept.session
            session.info.clear()  # a fresh transaction's notes only
            session.begin()
            yield session
            session.commit()
            session.expunge_all()  # returned rows stay usable, detached as before

    @contextmanager
    def transaction_now(self, busy_timeout_ms: int) -> Iterator[Session]:
        """``transaction`` whose ``BEGIN`` never waits: ``WriteLockBusy`` at once if
        another connection holds SQLite's write lock (or this thread's session is in
        use). The connection waits ``busy_timeout_ms`` again afterwards."""
        busy = False
        self._local.commit_seconds = 0.0
        with self._using() as kept:
            if kept is None:
                raise WriteLockBusy("this thread's kept session is in use")
            driver = kept.connection.connection.driver_connection
            assert driver is not None
            session = kept.session
            session.info.clear()
            session.begin()
            driver.execute("PRAGMA busy_timeout = 0")
            try:
                try:
                    session.connection()  # BEGIN IMMEDIATE now (the engine's "begin" hook)
                except OperationalError as exc:
                    if getattr(exc.orig, "sqlite_errorname", "") != "SQLITE_BUSY":
                        raise
                    session.rollback()
                    busy = True
            finally:
                driver.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
            if not busy:
                yield session
                began = time.monotonic()
                session.commit()
                self._local.commit_seconds = time.monotonic() - began
                session.expunge_all()
        if busy:
            raise WriteLockBusy("another writer holds SQLite's write lock")

    def last_commit_seconds(self) -> float:
        """How long this thread's last ``transaction_now`` took to ``COMMIT`` (its
        ``fsync``): what a slow disk makes slow, whatever the transaction held."""
        return float(getattr(self._local, "commit_seconds", 0.0))

    def close(self) -> None:
        """Close every kept connection of this process (``Database.dispose``)."""
        with self._lock:
            kept, self._all = self._all, []
        self._local = threading.local()
        for pair in kept:
            if pair.pid == os.getpid():
                self._close(pair)

    @contextmanager
    def _using(self) -> Iterator[_Kept | None]:
        kept = self._take()
        if kept is None:
            yield None
            return
        kept.busy = True
        try:
            yield kept
        except BaseException:
            self._forget(kept)  # rolled back by closing; a broken one serves no more
            raise
        finally:
            kept.busy = False

    def _take(self) -> _Kept | None:
        kept: _Kept | None = getattr(self._local, "kept", None)
        if kept is not None and kept.pid == os.getpid():
            return None if kept.busy else kept
        self._give_back_ended()
        connection = self._engine.connect()
        if self._options:
            connection.execution_options(**self._options)
        kept = _Kept(connection, Session(bind=connection, expire_on_commit=False), os.getpid())
        self._local.kept = kept
        with self._lock:
            self._all.append(kept)
        return kept

    def _give_back_ended(self) -> None:
        """Close the pairs of threads that have ended (a new one is being kept)."""
        with self._lock:
            ended = [k for k in self._all if not k.thread.is_alive()]
            self._all = [k for k in self._all if k.thread.is_alive()]
        for pair in ended:
            if pair.pid == os.getpid():
                self._close(pair)

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
            kept.session.close()  # rolls back an open transaction
        with suppress(Exception):
            kept.connection.close()
