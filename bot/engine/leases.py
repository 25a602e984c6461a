"""Claiming a row of a durable queue with a lease: shared by resume jobs and the outbox.

Both queues have the same columns (``state``, ``next_attempt_at``, ``lease_until``,
``attempts``, ``claim_token``) and the same rule: a row is runnable when it is queued
and due, or running with an expired lease (its worker died). The claim is a
conditional UPDATE that must hit exactly one row; on PostgreSQL the candidate is also
picked with ``FOR UPDATE SKIP LOCKED`` so replicas don't queue behind each other, and
on SQLite every write transaction is ``BEGIN IMMEDIATE``.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import TypeVar

from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from bot.engine.store import rowcount
from storage import OutboxItem, ResumeJob

Leased = TypeVar("Leased", ResumeJob, OutboxItem)


def claim_oldest(
    session: Session, model: type[Leased], now: dt.datetime, lease: dt.timedelta, postgres: bool
) -> tuple[Leased, str, int] | None:
    """Claim the oldest runnable row: ``(row as read, claim token, attempts incl. this one)``."""
    runnable = or_(
        and_(model.state == "queued", model.next_attempt_at <= now),
        and_(model.state == "running", model.lease_until < now),
    )
    query = select(model).where(runnable).order_by(model.id).limit(1)
    if postgres:
        query = query.with_for_update(skip_locked=True)
    row = session.scalars(query).first()
    if row is None:
        return None
    token = uuid.uuid4().hex
    claimed = rowcount(session.execute(
        update(model)
        .where(model.id == row.id, model.state == row.state, model.attempts == row.attempts)
        .values(state="running", claim_token=token, lease_until=now + lease,
                attempts=row.attempts + 1, updated_at=now)
        .execution_options(synchronize_session=False)
    ))
    if claimed != 1:
        return None
    return row, token, row.attempts + 1
