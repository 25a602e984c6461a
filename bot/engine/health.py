"""Is the database there? Readiness for ``/readyz`` and words for people when it is not.

``/healthz`` only says the process is alive. ``/readyz`` asks the database, because
without it this replica can neither record a click nor list requests: a load balancer
should send people elsewhere, and people who reach it anyway get
``DATABASE_DOWN`` instead of silence (see ``database_unreachable``).

The probe runs off the event loop with a short timeout, and concurrent probes share
one in-flight check, so a hanging database cannot pile up threads or stall the loop.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from renderers.words import said
from storage import Database

log = logging.getLogger("askhuman.health")

DATABASE_DOWN = said("db.down")
"""What people read when a command or mention fails because the database is down."""
PROBE_TIMEOUT_SECONDS = 2.0


def database_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) means "the database is down or locked" rather
    than a bug: connection refused or dropped, pool exhausted, file unusable, busy."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OperationalError | InterfaceError | DisconnectionError
                      | PoolTimeoutError | sqlite3.OperationalError):
            return True
        if isinstance(current, DBAPIError) and current.connection_invalidated:
            return True
        current = current.__cause__ or current.__context__
    return False


class DatabaseProbe:
    """``await probe.check()`` → None when the database answers, else a short reason.

    PostgreSQL: ``SELECT 1`` on a pooled connection (the pool pings it first, so a
    dropped server is noticed). SQLite: a fresh connection that must open the file
    (never creating it), read its schema and take the write lock within the timeout,
    so a missing, unreadable or locked file counts as down (pooled SQLite connections
    would keep answering ``SELECT 1`` from memory).
    """

    def __init__(self, database: Database, timeout: float = PROBE_TIMEOUT_SECONDS) -> None:
        self._db = database
        self._timeout = timeout
        self._inflight: asyncio.Future[None] | None = None

    async def check(self) -> str | None:
        if self._inflight is None or self._inflight.done():
            self._inflight = asyncio.ensure_future(asyncio.to_thread(self._ping))
        try:
            await asyncio.wait_for(asyncio.shield(self._inflight), self._timeout)
        except TimeoutError:
            log.warning("database readiness check timed out",
                        extra={"timeout_s": self._timeout})
            return "database check timed out"
        except Exception as exc:
            log.warning("database readiness check failed",
                        extra={"error": type(exc).__name__})
            return "database unreachable"
        return None

    def _ping(self) -> None:
        path = self._sqlite_file()
        if path is None:
            with self._db.engine.connect() as connection:
                connection.exec_driver_sql("SELECT 1")
            return
        uri = f"{path.resolve().as_uri()}?mode=rw"
        raw = sqlite3.connect(uri, uri=True, timeout=self._timeout, isolation_level=None,
                              check_same_thread=False)
        try:
            raw.execute("SELECT count(*) FROM sqlite_master").fetchone()
            raw.execute("BEGIN IMMEDIATE")
            raw.execute("ROLLBACK")
        finally:
            raw.close()

    def _sqlite_file(self) -> Path | None:
        """The SQLite database file, or None (PostgreSQL, or an in-memory database)."""
        url = self._db.engine.url
        if url.get_backend_name() != "sqlite" or not url.database:
            return None
        if url.database == ":memory:" or url.database.startswith("file:"):
            return None
        return Path(url.database)
