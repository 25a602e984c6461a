"""Cross-replica event dedupe, table pruning and data retention.

``seen_events`` makes "have we processed this platform event already?" one atomic
INSERT on its primary key, so a platform retry that reaches another replica is
recognized there too. Old rows (``seen_events`` past their retention, ``done``
outbox rows) are deleted by the worker sweep now and then, and so is what the
admin's ``retention:`` settings say is too old (answers, transcripts, audit rows):
``apply_retention``, also behind ``askhuman db prune``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bot.engine import audit_chain
from bot.engine.store import rowcount
from bot.settings import RetentionSettings
from storage import (
    AuditLog,
    Database,
    HumanRequest,
    OutboxItem,
    ResumeJob,
    Run,
    SeenEvent,
    StagedFile,
    Vote,
)

MAX_KEY_CHARS = 255
"""``seen_events.key`` length; longer keys are replaced by a digest."""
SEEN_RETENTION = dt.timedelta(days=1)
"""Longer than any platform retries or replays an event."""
OUTBOX_RETENTION = dt.timedelta(days=7)
"""Finished side effects are kept this long for diagnosis."""


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


def mark_seen_many(session: Session, now: dt.datetime, platform: str,
                   keys: list[str]) -> set[str]:
    """``mark_seen`` for several keys in one statement: the keys (as given) that were
    new. A key listed twice counts as new once (the caller decides who gets it).

    This runs in every group commit of stored clicks (``ClickWriter``: a callback's
    nonce, then its event id), on a thread that shares the GIL with the loop answering
    the burst. Building the multi-row ``INSERT`` with SQLAlchemy's Core compiled a new
    statement per batch, about 0.15 ms of CPU per key (80 % of such a commit, measured
    in ``benchmarks/README.md``, "Feishu click path"), so the statement is written here
    and handed to the driver: the same ``INSERT … ON CONFLICT (key) DO NOTHING
    RETURNING key``, ``seen_at`` through the column's own bind processor (stored exactly
    as the ORM stores it), split to stay below SQLite's bound-parameter limit.
    """
    wanted = {seen_key(platform, key): key for key in keys}
    if not wanted:
        return set()
    connection = session.connection()
    dialect = connection.dialect
    process = SeenEvent.__table__.c.seen_at.type.dialect_impl(dialect).bind_processor(dialect)
    seen_at = now if process is None else process(now)
    mark = "?" if dialect.paramstyle == "qmark" else "%s"
    quote = dialect.identifier_preparer.quote
    head = (f"INSERT INTO {quote('seen_events')} ({quote('key')}, {quote('platform')}, "
            f"{quote('seen_at')}) VALUES ")
    tail = f" ON CONFLICT ({quote('key')}) DO NOTHING RETURNING {quote('key')}"
    one = f"({mark}, {mark}, {mark})"
    stored, fresh = list(wanted), set[str]()
    for start in range(0, len(stored), SEEN_KEYS_PER_STATEMENT):
        chunk = stored[start:start + SEEN_KEYS_PER_STATEMENT]
        params: list[Any] = []
        for key in chunk:
            params += (key, platform[:32], seen_at)
        rows = connection.exec_driver_sql(head + ", ".join([one] * len(chunk)) + tail,
                                          tuple(params))
        fresh.update(wanted[str(key)] for key in rows.scalars())
    return fresh


SEEN_KEYS_PER_STATEMENT = 10_000
"""Keys per ``INSERT`` of ``mark_seen_many`` (3 parameters each: below SQLite's 32,766)."""


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


REDACTED = "[removed after the retention period]"
CHUNK = 500
"""Rows changed per transaction, so retention never holds the write lock for long."""


def apply_retention(
    database: Database, now: dt.datetime, retention: RetentionSettings
) -> dict[str, int]:
    """Purge or redact what ``retention`` says is too old; returns counts per kind.

    Each kind runs in chunks of ``CHUNK`` rows per transaction until nothing is left.
    Nothing is touched that a live request or run still needs: answers only of
    requests that are decided and resumed, transcripts only of finished runs.
    """
    counts = {"answers_redacted": 0, "transcripts_redacted": 0, "audit_deleted": 0}
    steps = (("answers_redacted", retention.answers, redact_answers),
             ("transcripts_redacted", retention.transcripts, redact_transcripts),
             ("audit_deleted", retention.audit, delete_audit))
    for name, seconds, step in steps:
        if seconds is None:
            continue
        cutoff = now - dt.timedelta(seconds=seconds)
        while True:
            with database.transaction() as session:
                done = step(session, now, cutoff)
            counts[name] += done
            if done < CHUNK:
                break
    return counts


def redact_answers(session: Session, now: dt.datetime, cutoff: dt.datetime) -> int:
    """Drop the values of requests decided before ``cutoff`` whose resume is over.

    The result keeps its status, action and message (who decided what, and when);
    ``values`` becomes ``{}`` in the result, in every vote and in the ``decided`` audit
    row, and staged files are deleted.
    """
    busy = select(ResumeJob.request_id).where(ResumeJob.state.in_(("queued", "running")))
    requests = session.scalars(
        select(HumanRequest)
        .where(HumanRequest.redacted_at.is_(None), HumanRequest.status != "pending",
               HumanRequest.decided_at < cutoff, HumanRequest.id.not_in(busy))
        .order_by(HumanRequest.id).limit(CHUNK)).all()
    if not requests:
        return 0
    ids = [request.id for request in requests]
    for request in requests:
        if request.result is not None:
            request.result = {**request.result, "values": {}}
        request.redacted_at = now
    session.execute(update(Vote).where(Vote.request_id.in_(ids)).values(values={})
                    .execution_options(synchronize_session=False))
    session.execute(delete(StagedFile).where(StagedFile.request_id.in_(ids))
                    .execution_options(synchronize_session=False))
    refs = [request.ref for request in requests]
    for row in session.scalars(select(AuditLog).where(AuditLog.request_ref.in_(refs))):
        if isinstance(row.details, dict) and "values" in row.details:
            row.details = audit_chain.redacted_details(row.details)  # digest stays hashed
    return len(requests)


def redact_transcripts(session: Session, now: dt.datetime, cutoff: dt.datetime) -> int:
    """Clear prompt, message history and output of runs that ended before ``cutoff``,
    and the result text their outbox rows kept (only rows that are finished)."""
    runs = session.scalars(
        select(Run)
        .where(Run.redacted_at.is_(None), Run.status.in_(("succeeded", "failed")),
               Run.updated_at < cutoff)
        .order_by(Run.id).limit(CHUNK)).all()
    if not runs:
        return 0
    for run in runs:
        run.prompt, run.snapshot, run.output, run.redacted_at = REDACTED, None, None, now
    posts = session.scalars(select(OutboxItem).where(
        OutboxItem.run_id.in_([run.id for run in runs]), OutboxItem.kind == "post_run_result",
        OutboxItem.state.in_(("done", "failed"))))
    for post in posts:
        post.payload = {**(post.payload or {}), "text": REDACTED}
    return len(runs)


def delete_audit(session: Session, now: dt.datetime, cutoff: dt.datetime) -> int:
    """Delete audit rows whose last occurrence is older than ``cutoff`` (recording the
    jumps this leaves in the hash chain, so ``askhuman audit verify`` still passes)."""
    last = func.coalesce(AuditLog.last_seen_at, AuditLog.created_at)
    ids = list(session.scalars(select(AuditLog.id).where(last < cutoff)
                               .order_by(AuditLog.id).limit(CHUNK)))
    if ids:
        audit_chain.record_gaps(session, now, ids)
        session.execute(delete(AuditLog).where(AuditLog.id.in_(ids))
                        .execution_options(synchronize_session=False))
    return len(ids)
