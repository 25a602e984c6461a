"""Engine and session helpers, plus programmatic Alembic upgrades.

SQLite gets ``BEGIN IMMEDIATE`` for every transaction: the write lock is taken up
front, so a read-then-conditional-write (a compare-and-set) can never interleave
with another writer, across threads or processes. PostgreSQL uses row locks
(``SELECT … FOR UPDATE [SKIP LOCKED]``) chosen by the caller via :attr:`Database.is_postgres`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 30_000


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
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def make_engine(url: str, **kwargs: Any) -> Engine:
    """A sync SQLAlchemy engine configured for safe concurrent writes."""
    if url.startswith("sqlite"):
        engine = create_engine(
            url, poolclass=NullPool, connect_args={"check_same_thread": False}, **kwargs
        )
        _sqlite_setup(engine)
        return engine
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 60)
    return create_engine(url, pool_pre_ping=True, **kwargs)


class Database:
    """One database: a sync engine and a session factory (sessions never autoflush late)."""

    def __init__(self, url: str, **engine_kwargs: Any) -> None:
        self.url = url
        self.engine = make_engine(url, **engine_kwargs)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def is_postgres(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """A session inside one transaction: committed on success, rolled back on error."""
        with self.sessions.begin() as session:
            yield session

    def upgrade(self) -> None:
        """Bring the schema to the newest migration."""
        upgrade(self.url, engine=self.engine)

    def dispose(self) -> None:
        self.engine.dispose()


def alembic_config(url: str) -> Config:
    """An Alembic config pointing at the packaged migrations (no alembic.ini needed)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head", engine: Engine | None = None) -> None:
    """Apply migrations up to ``revision`` (idempotent; safe to call on every start)."""
    config = alembic_config(url)
    own = engine is None
    engine = engine or make_engine(url)
    try:
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
