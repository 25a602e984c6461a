"""The Alembic migrations build exactly the tables the models describe."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

import storage
from storage.db import MIGRATIONS_DIR, current_revision, head_revision, make_engine

NEWEST = sorted(path.stem for path in (MIGRATIONS_DIR / "versions").glob("0*.py"))[-1]
"""Migrations are numbered: the newest file must be the one head (one line of history)."""


def test_upgrade_creates_schema_and_is_idempotent(db_url: str) -> None:
    assert current_revision(db_url) is None
    storage.upgrade(db_url)
    storage.upgrade(db_url)  # second call is a no-op
    assert current_revision(db_url) == head_revision() == NEWEST
    engine = make_engine(db_url)
    try:
        tables = set(inspect(engine).get_table_names())
        assert {"runs", "human_requests", "deliveries", "responses", "audit_log",
                "resume_jobs", "staged_files", "outbox", "seen_events", "api_clients",
                "external_requests", "run_triggers", "click_inbox", "run_starts",
                "instances", "rate_limits"} <= tables
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), storage.Base.metadata)
        assert diff == []
    finally:
        engine.dispose()


def test_database_transaction_rolls_back_on_error(db_url: str) -> None:
    import datetime as dt

    import pytest

    db = storage.Database(db_url)
    db.upgrade()
    now = dt.datetime(2025, 1, 1)
    with pytest.raises(RuntimeError), db.transaction() as session:
        session.add(storage.AuditLog(created_at=now, event="x", outcome="ok", details={}))
        session.flush()
        raise RuntimeError("boom")
    with db.transaction() as session:
        assert session.query(storage.AuditLog).count() == 0
    db.dispose()
