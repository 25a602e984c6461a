"""On a SQLite file, ``Database.lookup`` and ``Database.transaction`` reuse a thread's
connection and session (``KeptSessions``) and still do what they did: a lookup is one
fresh snapshot with every write discarded; a transaction commits, or rolls back when
its block raises, and starts with empty notes; nested use and errors are handled, and
nothing is kept across ``dispose``, a fork or a thread's end."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from storage.db import Database


def _database(url: str) -> Database:
    db = Database(url)
    with db.transaction() as session:
        session.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"))
        session.execute(text("INSERT INTO t (id, v) VALUES (1, 'a')"))
    return db


def _value(session: Session) -> str:
    return str(session.execute(text("SELECT v FROM t WHERE id = 1")).scalar())


def _set(db: Database, value: str) -> None:
    with db.transaction() as session:
        session.execute(text("UPDATE t SET v = :v WHERE id = 1"), {"v": value})


def _dbapi(session: Session) -> Any:
    return session.connection().connection.dbapi_connection


@pytest.fixture
def db(tmp_path: Path) -> Any:
    database = _database(f"sqlite:///{tmp_path / 'kept.db'}")
    yield database
    database.dispose()


def test_lookups_of_one_thread_reuse_one_connection(db: Database) -> None:
    with db.lookup() as session:
        first = _dbapi(session)
    with db.lookup() as session:
        assert _dbapi(session) is first
    with db.read() as session:  # ``read`` keeps opening its own
        assert _dbapi(session) is not first


def test_each_lookup_is_a_fresh_snapshot(db: Database) -> None:
    with db.lookup() as session:
        assert _value(session) == "a"
        writer = threading.Thread(target=_set, args=(db, "b"))
        writer.start()
        writer.join()
        assert _value(session) == "a"  # the snapshot this lookup began with
    with db.lookup() as session:
        assert _value(session) == "b"


def test_what_a_lookup_writes_is_discarded(db: Database) -> None:
    with db.lookup() as session:
        session.execute(text("UPDATE t SET v = 'lost' WHERE id = 1"))
        assert _value(session) == "lost"
    with db.lookup() as session:
        assert _value(session) == "a"
    with db.read() as session:
        assert _value(session) == "a"


def test_a_lookup_inside_a_lookup_gets_its_own_connection(db: Database) -> None:
    with db.lookup() as outer:
        with db.lookup() as inner:
            assert _dbapi(inner) is not _dbapi(outer)
            assert _value(inner) == "a"
        assert _value(outer) == "a"


def _checked_out(db: Database) -> int:
    return int(db.engine.pool.checkedout())  # type: ignore[attr-defined]


def test_after_an_error_the_next_lookup_works_and_nothing_leaks(db: Database) -> None:
    """The kept pair is given back after an error (a broken connection must not serve
    the next lookup); the next lookup checks one out again."""
    with db.lookup() as session:
        _value(session)
    kept = _checked_out(db)  # this thread's lookup pair (and its write pair)
    with pytest.raises(RuntimeError), db.lookup() as session:
        raise RuntimeError("the lookup's own code failed")
    assert _checked_out(db) == kept - 1
    with db.lookup() as session:
        assert _value(session) == "a"
    assert _checked_out(db) == kept


class _Base(DeclarativeBase):
    pass


class _Row(_Base):
    __tablename__ = "t"
    id: Mapped[int] = mapped_column(primary_key=True)
    v: Mapped[str]


def test_loaded_rows_stay_readable_after_the_lookup(db: Database) -> None:
    with db.lookup() as session:
        row = session.get(_Row, 1)
    assert row is not None and row.v == "a"  # expunged before the rollback: not expired


def test_dispose_closes_the_kept_connections(db: Database) -> None:
    with db.lookup() as session:
        kept = _dbapi(session)
    db.dispose()
    with pytest.raises(sqlite3.ProgrammingError):
        kept.execute("SELECT 1")  # closed
    with db.lookup() as session:  # and lookups go on with a new one
        assert _value(session) == "a"


def test_a_forked_child_does_not_use_its_parents_connection(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    with db.lookup() as session:
        parents = _dbapi(session)
    real = os.getpid()
    monkeypatch.setattr("os.getpid", lambda: real + 1)  # as after a fork
    with db.lookup() as session:
        assert _dbapi(session) is not parents and _value(session) == "a"


def test_threads_keep_a_connection_each(db: Database) -> None:
    """Both threads look up at once: neither may be handed the other's connection."""
    seen: dict[str, Any] = {}
    both_inside = threading.Barrier(2, timeout=5)

    def look(name: str) -> None:
        with db.lookup() as session:
            seen[name] = _dbapi(session)
            both_inside.wait()

    threads = [threading.Thread(target=look, args=(n,)) for n in ("x", "y")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen["x"] is not seen["y"]


def test_postgres_and_memory_lookups_are_plain_reads(db_url: str, db: Database) -> None:
    """Only a SQLite file keeps a connection checked out between lookups."""
    before = _checked_out(db)
    with db.lookup() as session:
        session.execute(text("SELECT 1"))
    assert _checked_out(db) == before + 1
    url = db_url if "postgresql" in db_url else "sqlite://"
    database = Database(url)
    try:
        for _ in range(2):
            with database.lookup() as session:
                session.execute(text("SELECT 1"))
        assert getattr(database.engine.pool, "checkedout", lambda: 0)() == 0
    finally:
        database.dispose()


# ------------------------------------------------------------------ write transactions


def test_transactions_of_one_thread_reuse_one_connection_and_commit(db: Database) -> None:
    with db.transaction() as session:
        first = _dbapi(session)
        session.execute(text("UPDATE t SET v = 'b' WHERE id = 1"))
    with db.transaction() as session:
        assert _dbapi(session) is first
    with db.read() as session:
        assert _value(session) == "b"


def test_a_transaction_that_raises_is_rolled_back(db: Database) -> None:
    with pytest.raises(RuntimeError), db.transaction() as session:
        session.execute(text("UPDATE t SET v = 'lost' WHERE id = 1"))
        raise RuntimeError("the step failed")
    with db.read() as session:
        assert _value(session) == "a"
    with db.transaction() as session:  # and the next one works
        session.execute(text("UPDATE t SET v = 'c' WHERE id = 1"))
    with db.read() as session:
        assert _value(session) == "c"


def test_each_transaction_starts_with_empty_notes(db: Database) -> None:
    """``session.info`` carries what runs after a commit (outbox claims, resolved refs):
    a note left by one transaction must never reach the next."""
    with db.transaction() as session:
        session.info["left"] = ["from the first"]
    with db.transaction() as session:
        assert "left" not in session.info


def test_a_transaction_holds_the_write_lock_until_it_commits(db: Database) -> None:
    """Another thread's write waits for ours (``BEGIN IMMEDIATE`` and the
    ``WriterLock``), then sees what we committed."""
    inside, seen = threading.Event(), []

    def other() -> None:
        inside.wait(5)
        with db.transaction() as session:
            seen.append(_value(session))

    thread = threading.Thread(target=other)
    thread.start()
    with db.transaction() as session:
        session.execute(text("UPDATE t SET v = 'mine' WHERE id = 1"))
        inside.set()
        thread.join(0.3)
        assert thread.is_alive()  # still waiting for the lock
    thread.join(5)
    assert seen == ["mine"]


def test_objects_written_stay_readable_after_the_commit(db: Database) -> None:
    with db.transaction() as session:
        row = _Row(id=2, v="new")
        session.add(row)
    assert row.v == "new" and row.id == 2
    with db.lookup() as session:
        assert session.get(_Row, 2) is not None


def test_an_ended_threads_connection_is_given_back(db: Database) -> None:
    def write() -> None:
        with db.transaction() as session:
            session.execute(text("UPDATE t SET v = 'x' WHERE id = 1"))

    before = _checked_out(db)
    for _ in range(3):
        thread = threading.Thread(target=write)
        thread.start()
        thread.join()
    # each ended thread's pair was closed when the next thread kept one: one is left
    assert _checked_out(db) == before + 1
