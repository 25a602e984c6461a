"""The Alembic migrations build exactly the tables the models describe."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

import storage
from storage.db import (
    MIGRATIONS_DIR,
    current_revision,
    head_revision,
    make_engine,
    newest_migration,
)

ROOT = Path(__file__).resolve().parents[2]

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


def test_upgrade_loads_alembic_only_when_there_is_something_to_migrate(
    db_url: str, tmp_path: Path,
) -> None:
    """A server restarted on a database at the newest revision never imports Alembic
    (nor Mako and Pygments behind it); a database behind is migrated with it."""
    assert newest_migration() == NEWEST
    code = ("import sys\nfrom storage import Database\nDatabase(sys.argv[1]).upgrade()\n"
            "print('ALEMBIC', 'alembic' in sys.modules)")

    def upgrade_in_a_new_process() -> str:
        result = subprocess.run([sys.executable, "-c", code, db_url], capture_output=True,
                                text=True, cwd=tmp_path, env={"PYTHONPATH": str(ROOT)})
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout.strip().splitlines()[-1]

    previous = sorted(path.stem for path in (MIGRATIONS_DIR / "versions").glob("0*.py"))[-2]
    storage.upgrade(db_url, revision=previous)
    assert upgrade_in_a_new_process() == "ALEMBIC True"  # one migration behind: migrated
    assert current_revision(db_url) == NEWEST
    assert upgrade_in_a_new_process() == "ALEMBIC False"  # at the newest: nothing to do
    assert current_revision(db_url) == NEWEST
