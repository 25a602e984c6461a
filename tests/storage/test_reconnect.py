"""A pooled PostgreSQL connection the server closed while it sat idle is replaced, not
used: the pool pings connections that were idle for a while (``ping_after``) instead
of pinging at every checkout."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.exc import OperationalError

from storage import Database

pytestmark = pytest.mark.postgres


def _close_server_side(url: str) -> int:
    """End every server process of ``url``'s database, as a server restart would."""
    name = make_url(url).database
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            return len(conn.execute(text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = :name AND pid <> pg_backend_pid()"), {"name": name}).all())
    finally:
        admin.dispose()


def _answer(db: Database) -> int:
    with db.transaction() as session:
        return int(session.execute(text("SELECT 41 + 1")).scalar_one())


def test_an_idle_connection_closed_by_the_server_is_replaced(postgres_url: str) -> None:
    db = Database(postgres_url, ping_after=0.2)
    try:
        assert _answer(db) == 42  # one connection now waits in the pool
        assert _close_server_side(postgres_url) >= 1
        time.sleep(0.3)
        assert _answer(db) == 42  # pinged, found dead, replaced
    finally:
        db.dispose()


def test_without_the_idle_ping_the_dead_connection_would_be_used(postgres_url: str) -> None:
    """The control: the same sequence with a ping threshold never reached fails, so the
    test above passes because of the ping."""
    db = Database(postgres_url, ping_after=3600)
    try:
        assert _answer(db) == 42
        assert _close_server_side(postgres_url) >= 1
        with pytest.raises(OperationalError):
            _answer(db)
        assert _answer(db) == 42  # the failure invalidated the pool: the next one works
    finally:
        db.dispose()
