"""Engine and session helpers, plus programmatic Alembic upgrades.

Alembic (with Mako and Pygments, about 12 MB of a server's memory) is imported only
when there is something to migrate: ``upgrade`` first reads the stored revision with
plain SQLAlchemy and returns when it is already the newest one shipped
(``newest_migration``: the highest-numbered file in ``migrations/versions``; a test
holds that it is Alembic's one head).

SQLite gets ``BEGIN IMMEDIATE`` for every write transaction: the write lock is taken
up front, so a read-then-conditional-write (a compare-and-set) can never interleave
with another writer, across threads or processes. :meth:`Database.read` is the
exception: a snapshot for lookups only, started with a plain (deferred) ``BEGIN`` so
that, under WAL, readers neither wait for the writer nor hold it up. PostgreSQL uses
row locks (``SELECT … FOR UPDATE [SKIP LOCKED]``) chosen by the caller via
:attr:`Database.is_postgres`. On a SQLite file each thread reuses one connection and
session for its write transactions and one for its lookups (``kept_sessions``).
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, create_engine, event, inspect, make_url, text
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

from storage.kept_sessions import KeptSessions, WriteLockBusy

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 30_000
READ_ONLY = "askhuman_read_only"
"""Execution option marking a :meth:`Database.read` connection (deferred ``BEGIN``)."""


def _sqlite_setup(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event emit BEGIN itself (pysqlite would defer it).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        if connection.get_execution_options().get(READ_ONLY):
            connection.exec_driver_sql("BEGIN")  # a WAL snapshot: no write lock
        else:
            connection.exec_driver_sql("BEGIN IMMEDIATE")


IDLE_PING_SECONDS = 10.0
"""A pooled PostgreSQL connection idle for longer is pinged before it is used again."""


def _ping_when_idle(engine: Engine, after: float) -> None:
    """Ping a pooled connection at checkout only if it sat idle for ``after`` seconds.

    SQLAlchemy's ``pool_pre_ping`` pings at every checkout: a round trip per
    transaction, ~110 µs of CPU here and ~10 transactions per decision. A connection in
    steady use has just proved it works; one that sat idle may have been closed by the
    server, a restart or a proxy meanwhile, and is pinged. A failed ping discards it and
    the pool hands out another (``DisconnectionError``), as with ``pool_pre_ping``.
    """

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get("idle_since")
        if since is None or time.monotonic() - since < after:
            return
        try:
            alive = engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:
            raise DisconnectionError("an idle pooled connection is gone") from exc
        if not alive:
            raise DisconnectionError("an idle pooled connection is gone")


def _sqlite_in_memory(url: str) -> bool:
    database = url.split("://", 1)[-1].lstrip("/").split("?", 1)[0]
    return database in ("", ":memory:") or "mode=memory" in url


def make_engine(url: str, **kwargs: Any) -> Engine:
    """A sync SQLAlchemy engine configured for safe concurrent writes."""
    if url.startswith("sqlite"):
        if _sqlite_in_memory(url):
            kwargs.setdefault("poolclass", NullPool)
        else:
            # Keep connections open: opening one costs the PRAGMAs and a schema read,
            # and closing the last one checkpoints and removes the WAL file, which
            # made every transaction pay for a connect and, often, a checkpoint.
            kwargs.setdefault("pool_size", 10)
            kwargs.setdefault("max_overflow", 60)
        engine = create_engine(url, connect_args={"check_same_thread": False}, **kwargs)
        _sqlite_setup(engine)
        return engine
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 60)
    ping_after = kwargs.pop("ping_after", IDLE_PING_SECONDS)
    engine = create_engine(url, **kwargs)
    _ping_when_idle(engine, ping_after)
    return engine


class WriterLock:
    """SQLite's writers queue here, in this process and across processes, instead of in
    SQLite's busy handler, which sleeps and polls (1, 2, 5 … 100 ms) and so hands the
    write lock over late and out of order under a burst. Threads of one process queue
    on an ``RLock``; the holder then takes an exclusive ``flock`` on a file beside the
    database (``<file>-writer``), on which the kernel queues other processes and wakes
    one the moment it is released (a killed holder's lock is released by the kernel).
    It is held exactly as long as SQLite's own write lock would be (``BEGIN IMMEDIATE``
    to ``COMMIT``), so it adds no wait, only order. Processes that do not take it (an
    older askhuman, ``sqlite3``) still wait in ``busy_timeout``."""

    def __init__(self, database_file: str | None) -> None:
        self._threads = threading.RLock()
        self._path = None if database_file is None else f"{database_file}-writer"
        self._fd: int | None = None
        self._depth = 0

    def __enter__(self) -> WriterLock:
        self._take(wait=True)
        return self

    def try_enter(self) -> bool:
        """Take the lock only if that needs no wait (no other thread of this process and
        no other process holds it): True if taken (give it back with ``release``)."""
        return self._take(wait=False)

    def _take(self, wait: bool) -> bool:
        if not self._threads.acquire(blocking=wait):
            return False
        try:
            if self._depth == 0 and self._path is not None:
                if self._fd is None:
                    self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
                fcntl.flock(self._fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # without waiting: another process holds it
            self._threads.release()
            return False
        except BaseException:
            self._threads.release()
            raise
        self._depth += 1
        return True

    def release(self) -> None:
        """Give back a lock taken with ``try_enter``."""
        self.__exit__()

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        try:
            if self._depth == 0 and self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._threads.release()


    def close(self) -> None:
        """Close the lock file (``Database.dispose``); taken again on the next write."""
        with self._threads:
            if self._fd is not None and self._depth == 0:
                os.close(self._fd)
                self._fd = None


def _sqlite_file(url: str) -> str | None:
    """The database file of a SQLite URL (None: in memory)."""
    if _sqlite_in_memory(url):
        return None
    database = make_url(url).database
    return os.path.abspath(database) if database else None


class Database:
    """One database: a sync engine and a session factory (sessions never autoflush late)."""

    def __init__(self, url: str, **engine_kwargs: Any) -> None:
        self.url = url
        self.engine = make_engine(url, **engine_kwargs)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)
        sqlite = self.engine.dialect.name == "sqlite"
        file = _sqlite_file(url) if sqlite else None
        self.sqlite_file = file
        """The SQLite file's absolute path (None: PostgreSQL, or SQLite in memory)."""
        self._writer = WriterLock(file) if sqlite else None
        """SQLite: every write transaction holds it (``WriterLock``)."""
        on_file = file is not None
        self._kept_reads = KeptSessions(self.engine, {READ_ONLY: True}) if on_file else None
        self._kept_writes = KeptSessions(self.engine) if on_file else None
        """A SQLite file: the connection and session each thread's lookups, and its
        write transactions, reuse (``KeptSessions``)."""

    @property
    def is_postgres(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """A session inside one transaction: committed on success, rolled back on error
        (on a SQLite file, the thread's kept session: ``KeptSessions.transaction``)."""
        if self._writer is None:
            with self.sessions.begin() as session:
                yield session
            return
        with self._writer:
            if self._kept_writes is not None:
                with self._kept_writes.transaction() as kept:
                    if kept is not None:
                        yield kept
                        return
            with self.sessions.begin() as session:
                yield session

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A session for lookups only: one consistent snapshot, always rolled back.

        On SQLite it does not take the write lock (deferred ``BEGIN``; WAL lets it run
        beside the writer), so reads never queue behind, or delay, a compare-and-set.
        Anything written in it is discarded; decide nothing on it without re-checking
        under :meth:`transaction`.
        """
        with self.engine.connect() as connection:
            connection.execution_options(**{READ_ONLY: True})
            with Session(bind=connection, expire_on_commit=False) as session:
                session.begin()
                try:
                    yield session
                finally:
                    session.expunge_all()  # keep loaded rows usable after the rollback
                    session.rollback()

    @contextmanager
    def lookup(self) -> Iterator[Session]:
        """``read`` for a thread that looks up often (the engine's lookups on the event
        loop): on a SQLite file it reuses the thread's kept connection and session
        (``KeptSessions``), each lookup still one snapshot, always rolled back."""
        if self._kept_reads is not None:
            with self._kept_reads.lookup() as session:
                if session is not None:
                    yield session
                    return
        with self.read() as session:
            yield session

    @contextmanager
    def transaction_now(self) -> Iterator[Session]:
        """``transaction`` for a thread that must not wait (the event loop), holding the
        lock from ``free_write_lock``: ``WriteLockBusy`` at once instead of waiting
        when a writer that does not take that lock (``sqlite3``, an older askhuman)
        holds SQLite's own."""
        if self._kept_writes is None:
            raise WriteLockBusy("no kept session: not a SQLite file")
        with self._kept_writes.transaction_now(SQLITE_BUSY_TIMEOUT_MS) as session:
            yield session

    def last_commit_seconds(self) -> float:
        """How long this thread's last ``transaction_now`` took to commit."""
        return self._kept_writes.last_commit_seconds() if self._kept_writes else 0.0

    def free_write_lock(self) -> WriterLock | None:
        """SQLite's write lock, taken for this thread if it is free right now, else None
        (also on PostgreSQL and in-memory SQLite, where there is none to take). Its
        ``transaction`` then runs without waiting; ``release`` it afterwards."""
        if self._writer is None or self._kept_writes is None or not self._writer.try_enter():
            return None
        return self._writer

    def upgrade(self) -> None:
        """Bring the schema to the newest migration."""
        upgrade(self.url, engine=self.engine)

    def dispose(self) -> None:
        for kept in (self._kept_reads, self._kept_writes):
            if kept is not None:
                kept.close()
        self.engine.dispose()
        if self._writer is not None:
            self._writer.close()


def alembic_config(url: str) -> Config:
    """An Alembic config pointing at the packaged migrations (no alembic.ini needed)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head", engine: Engine | None = None) -> None:
    """Apply migrations up to ``revision`` (idempotent; safe to call on every start)."""
    own = engine is None
    engine = engine or make_engine(url)
    try:
        if revision == "head" and stored_revision(engine) == newest_migration():
            return  # nothing to do, and Alembic stays unloaded
        from alembic import command

        config = alembic_config(url)
        with engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                # Serialize concurrent upgrades from several replicas.
                connection.exec_driver_sql("SELECT pg_advisory_xact_lock(726164)")
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
    finally:
        if own:
            engine.dispose()
    log.info("database schema upgraded", extra={"revision": revision})


def newest_migration() -> str:
    """The revision of the highest-numbered migration file (each file's revision is its
    name; ``tests/storage/test_migrations.py`` holds that this is Alembic's head)."""
    return max(path.stem for path in (MIGRATIONS_DIR / "versions").glob("[0-9]*.py"))


def stored_revision(engine: Engine) -> str | None:
    """The one revision in ``alembic_version``, read without Alembic (None when there is
    no table yet, or not exactly one row)."""
    with engine.connect() as connection:
        connection.execution_options(**{READ_ONLY: True})  # SQLite: no write lock
        if not inspect(connection).has_table("alembic_version"):
            return None
        rows = connection.execute(text("SELECT version_num FROM alembic_version")).all()
    return str(rows[0][0]) if len(rows) == 1 else None


def current_revision(url: str) -> str | None:
    """The schema revision stored in the database (None before the first upgrade)."""
    from alembic.runtime.migration import MigrationContext

    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            rev: str | None = MigrationContext.configure(connection).get_current_revision()
            return rev
    finally:
        engine.dispose()


def head_revision() -> str:
    """The newest migration shipped with this code (what ``upgrade`` moves to)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    if head is None:
        raise RuntimeError("no migrations found in storage/migrations")
    return head
