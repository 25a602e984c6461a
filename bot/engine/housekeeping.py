"""Cross-replica event dedupe and table pruning (single-transaction steps).

``seen_events`` makes "have we processed this platform event already?" one atomic
INSERT on its primary key, so a platform retry that reaches another replica is
recognized there too. Old rows (``seen_events`` past their retention, ``done``
outbox rows) are deleted by the worker sweep now and then.
"""

from __future__ import annotations

import datetime as dt
import hashlib

from sqlalchemy import delete
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bot.engine.store import rowcount
from storage import Database, OutboxItem, SeenEvent

MAX_KEY_CHARS = 255
"""``seen_events.key`` length; longer keys are replaced by a digest."""


def seen_key(platform: str, key: str) -> str:
    """The stored key: ``"<platform>:<key>"``, hashed when it would not fit."""
    full = f"{platform}:{key}"
    if len(full) <= MAX_KEY_CHARS:
        return full
    return f"{platform}:sha256:{hashlib.sha256(key.encode()).hexdigest()}"


def insert_seen(database: Database, now: dt.datetime, platform: str, key: str) -> bool:
    """Insert the key in its own transaction: True if new, False if it was already there.

    The primary key makes this atomic across threads, processes and replicas on
    SQLite and PostgreSQL alike; a duplicate surfaces as ``IntegrityError`` (and the
    transaction, which holds nothing else, is rolled back).
    """
    try:
        with database.transaction() as session:
            session.add(SeenEvent(key=seen_key(platform, key), platform=platform[:32],
                                  seen_at=now))
            session.flush()
    except IntegrityError:
        return False
    return True


def mark_seen(session: Session, now: dt.datetime, platform: str, key: str) -> bool:
    """``insert_seen`` inside the caller's transaction: True if new, False if known.

    ``INSERT … ON CONFLICT DO NOTHING`` (SQLite and PostgreSQL) never raises on a
    duplicate, so many keys can share one transaction (``Engine.first_seen``); the
    verdict is whether a row was inserted, atomic on the primary key like ``insert_seen``'s.
    """
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    statement = dialect.insert(SeenEvent).values(
        key=seen_key(platform, key), platform=platform[:32], seen_at=now
    ).on_conflict_do_nothing(index_elements=["key"]).returning(SeenEvent.key)
    # RETURNING, not the row count: psycopg reports -1 for this statement.
    return session.connection().execute(statement).first() is not None


def prune(
    database: Database, now: dt.datetime, seen_retention: dt.timedelta,
    outbox_retention: dt.timedelta,
) -> dict[str, int]:
    """Delete ``seen_events`` and ``done`` outbox rows older than their retention."""
    with database.transaction() as session:
        seen = rowcount(session.execute(
            delete(SeenEvent).where(SeenEvent.seen_at < now - seen_retention)
            .execution_options(synchronize_session=False)))
        done = rowcount(session.execute(
            delete(OutboxItem).where(OutboxItem.state == "done",
                                     OutboxItem.updated_at < now - outbox_retention)
            .execution_options(synchronize_session=False)))
    return {"seen_events": seen, "outbox_done": done}
