"""Per-client API rate limits, global across replicas: a token bucket in one row.

A request spends a token with one conditional ``UPDATE … RETURNING``: the bucket is
refilled for the time since ``updated_at`` (capped at the client's ``rate_limit``)
and loses one token, only where the refilled bucket holds at least one. Replicas
serialize on that row (PostgreSQL waits for the row lock and re-checks the ``WHERE``
on the newest version; SQLite writers hold the file's write lock, ``BEGIN
IMMEDIATE``), so any number of replicas together allow ``rate_limit`` requests per
minute, in bursts of at most ``rate_limit``.

The clock is PostgreSQL's (``statement_timestamp()``), so replicas whose clocks
disagree still agree on the bucket; SQLite's processes share one machine and use
its clock. ``updated_at`` never moves backwards (a statement that waited for the
lock may carry an older time than the row), so no refill is counted twice.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import ColumnElement, Double, case, cast, func, literal, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from bot.engine.committer import Committer
from storage import RateLimit


class RateLimits:
    """Spends API clients' tokens in the shared ``rate_limits`` rows."""

    def __init__(self, committer: Committer, postgres: bool) -> None:
        self._committer = committer
        self._postgres = postgres

    async def take(self, client_id: int, per_minute: int) -> float:
        """Spend one of ``client_id``'s tokens: 0.0 if spent, else the seconds until
        the next one is due (the caller answers 429)."""
        now = None if self._postgres else time.time()
        return await self._committer.tx(
            lambda session: take(session, client_id, per_minute, self._postgres, now))


def take(session: Session, client_id: int, per_minute: int, postgres: bool,
         now: float | None) -> float:
    """One token from the bucket (made full on first use), or the wait for the next.

    ``now`` is epoch seconds (SQLite); on PostgreSQL it is None and the database's
    statement time is used. One statement when a token is there; a refusal, or the
    client's first request, costs two or three more.
    """
    if postgres:  # a spent token need not survive a crash: skip the WAL flush wait
        session.execute(text("SET LOCAL synchronous_commit = off"))
    cap = float(max(1, per_minute))
    per_second = cap / 60.0
    at: ColumnElement[Any] = (
        cast(func.extract("epoch", func.statement_timestamp()), Double) if postgres
        else literal(now, Double))
    refilled = _refilled(at, cap, per_second)
    spend = (update(RateLimit)
             .where(RateLimit.client_id == client_id, refilled >= 1.0)
             .values(tokens=refilled - 1.0, updated_at=_latest(at))
             .returning(RateLimit.tokens))
    if session.execute(spend).first() is not None:
        return 0.0
    insert = pg_insert(RateLimit) if postgres else sqlite_insert(RateLimit)
    made = session.execute(
        insert.values(client_id=client_id, tokens=cap - 1.0, updated_at=at)
        .on_conflict_do_nothing(index_elements=[RateLimit.client_id])
        .returning(RateLimit.client_id)).first()
    if made is not None:
        return 0.0
    if session.execute(spend).first() is not None:  # another replica made it just now
        return 0.0
    held = session.execute(select(refilled).where(RateLimit.client_id == client_id)).scalar()
    return max(0.001, (1.0 - float(held or 0.0)) / per_second)


def _refilled(at: ColumnElement[Any], cap: float, per_second: float) -> ColumnElement[Any]:
    """The row's tokens at time ``at``: plus the refill since ``updated_at``, at most
    ``cap`` (portable ``least``/``greatest``: SQLite spells them ``min``/``max``)."""
    elapsed = case((at > RateLimit.updated_at, at - RateLimit.updated_at), else_=0.0)
    grown = RateLimit.tokens + elapsed * per_second
    return case((grown > cap, cap), else_=grown)


def _latest(at: ColumnElement[Any]) -> ColumnElement[Any]:
    return case((at > RateLimit.updated_at, at), else_=RateLimit.updated_at)
