"""Claiming a row of a durable queue with a lease: shared by resume jobs and the outbox.

Both queues have the same columns (``state``, ``next_attempt_at``, ``lease_until``,
``attempts``, ``claim_token``) and the same rule: a row is runnable when it is queued
and due, or running with an expired lease (its worker died). The claim is a
conditional UPDATE that must hit exactly one row; on PostgreSQL the candidate is also
picked with ``FOR UPDATE SKIP LOCKED`` so replicas don't queue behind each other, and
on SQLite every write transaction is ``BEGIN IMMEDIATE``.

Leases are short and kept alive by a ``Heartbeat`` while the work runs. Each row also
names its ``holder``, the ``instances`` row of the process that holds it: once that
process's own heartbeat (``bot.engine.instances``) is stale, its rows are runnable at
once, so a killed process's work is taken over within seconds rather than at the end
of its leases. A live holder's rows are never taken: its heartbeat is fresh, and its
leases are renewed. A holder that never registered (a test, a one-off CLI command)
falls back to the lease alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import String, and_, bindparam, cast, or_, select, update
from sqlalchemy.orm import Session

from bot.engine.store import rowcount
from storage import ClickInbox, Database, Instance, OutboxItem, ResumeJob, RunStart

log = logging.getLogger("askhuman.engine")

Leased = TypeVar("Leased", ResumeJob, OutboxItem, ClickInbox, RunStart)
T = TypeVar("T")


class LeaseLost(Exception):
    """Another worker took the row over (our lease expired); drop our result."""


@dataclass(frozen=True)
class Claimant:
    """Who claims (stamped on the rows as ``holder``), and the moment before which a
    holder's heartbeat counts as stale (its process is presumed dead)."""

    instance: str | None = None
    stale_before: dt.datetime | None = None


NOBODY = Claimant()
"""A claim that stamps no holder and takes rows over by lease expiry only."""


@dataclass(frozen=True)
class Hold:
    """How a row born claimed (an outbox row, a stored click) is held: for ``lease``,
    by the instance ``holder``."""

    lease: dt.timedelta
    holder: str | None = None


def _dead_holders(stale_before: Any) -> Any:
    """Ids of instances whose process is gone: heartbeat stale, or stopped cleanly."""
    return select(Instance.id).where(
        or_(Instance.heartbeat_at < stale_before, Instance.stopped_at.is_not(None)))


def _taken_over(model: type[Leased], now: Any, stale_before: Any) -> Any:
    """A held row another process may take: its lease ran out or its holder is dead."""
    if stale_before is None:
        return model.lease_until < now
    return or_(model.lease_until < now, model.holder.in_(_dead_holders(stale_before)))


def claim_oldest(
    session: Session, model: type[Leased], now: dt.datetime, lease: dt.timedelta, postgres: bool,
    held: tuple[str, ...] = ("running",), claimant: Claimant = NOBODY,
) -> tuple[Leased, str, int] | None:
    """Claim the oldest runnable row: ``(row as read, claim token, attempts incl. this one)``.

    Runnable means queued and due, or in one of the ``held`` states with an expired
    lease or a dead holder. A queued row becomes ``running``; a held one keeps its
    state (the click inbox's ``telling`` stays ``telling``).
    """
    runnable = or_(
        and_(model.state == "queued", model.next_attempt_at <= now),
        and_(model.state.in_(held), _taken_over(model, now, claimant.stale_before)),
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
        .values(state=row.state if row.state in held else "running", claim_token=token,
                lease_until=now + lease, attempts=row.attempts + 1, updated_at=now,
                holder=claimant.instance)
        .execution_options(synchronize_session=False)
    ))
    if claimed != 1:
        return None
    return row, token, row.attempts + 1


def claim_many(
    session: Session, model: type[Leased], now: dt.datetime, lease: dt.timedelta, postgres: bool,
    limit: int, *columns: str, claimant: Claimant = NOBODY,
) -> list[tuple[int, str, int, tuple[Any, ...]]]:
    """Claim up to ``limit`` of the oldest runnable rows with ONE statement: an UPDATE of
    the rows a sub-SELECT picks (``FOR UPDATE SKIP LOCKED`` on PostgreSQL), re-checking
    ``claim_oldest``'s rule, that returns what it claimed. Each row gets a fencing token
    of its own (a random prefix and the row id), so a worker with several free slots
    pays one statement and one commit for all of them.

    Returns ``(row id, claim token, attempts incl. this one, the values of the extra
    ``columns`` named)`` per claimed row, oldest first.
    """
    session.flush()  # plain SQL below: rows this transaction added must be visible to it
    prefix = uuid.uuid4().hex + ":"
    rows = session.connection().execute(
        _claim_statement(model, postgres, columns, claimant.stale_before is not None),
        {"now": now, "until": now + lease, "prefix": prefix, "n": limit,
         "holder": claimant.instance, "stale": claimant.stale_before},
    ).all()
    return sorted((row[0], f"{prefix}{row[0]}", row[1], tuple(row[2:])) for row in rows)


@functools.cache
def _claim_statement(model: type[Leased], postgres: bool, columns: tuple[str, ...],
                     liveness: bool) -> Any:
    """``claim_many``'s statement, built once and run as plain SQL with its parameters
    (building and ORM-executing it on every claim cost ~0.2 ms of CPU)."""
    now: Any = bindparam("now")
    stale: Any = bindparam("stale") if liveness else None
    runnable = or_(
        and_(model.state == "queued", model.next_attempt_at <= now),
        and_(model.state == "running", _taken_over(model, now, stale)),
    )
    picked: Any = select(model.id).where(runnable).order_by(model.id).limit(bindparam("n"))
    if postgres:  # a CTE runs once: an IN (sub-SELECT … SKIP LOCKED) may run per row
        picked = select(picked.with_for_update(skip_locked=True)
                        .cte("picked").prefix_with("MATERIALIZED").c.id)
    return (
        update(model)
        .where(model.id.in_(picked), runnable)
        .values(state="running",
                claim_token=bindparam("prefix", type_=String) + cast(model.id, String),
                lease_until=bindparam("until"), attempts=model.attempts + 1, updated_at=now,
                holder=bindparam("holder", type_=String))
        .returning(model.id, model.attempts, *(getattr(model, name) for name in columns))
    )


def renew(
    session: Session, model: type[Leased], row_id: int, token: str, now: dt.datetime,
    lease: dt.timedelta,
) -> bool:
    """Extend our lease on a row; False when it is no longer ours (taken over or finished).

    The same compare-and-set on the claim token as finishing: a holder whose row was
    taken over can never extend the new holder's lease.
    """
    return rowcount(session.execute(
        update(model)
        .where(model.id == row_id, model.claim_token == token, model.state == "running")
        .values(lease_until=now + lease)
        .execution_options(synchronize_session=False)
    )) == 1


class Heartbeat(Generic[Leased]):
    """Keep renewing a claimed row's lease while its work runs (``async with``).

    Leases are short (seconds), so a crashed holder is taken over quickly, while a
    slow live one (a long model call) keeps its row: every ``every`` seconds the lease
    is pushed ``lease`` into the future. If a renewal finds the row is not ours any
    more, ``lost`` is set and renewing stops; the holder must then drop its work
    (its final compare-and-set on the claim token would fail anyway: fencing). A
    failed renewal (database briefly down) is logged and retried at the next beat.
    """

    def __init__(
        self, database: Database, clock: Callable[[], dt.datetime], model: type[Leased],
        row_id: int, token: str, lease: dt.timedelta, every: float,
    ) -> None:
        self._database, self._clock = database, clock
        self._model: type[Leased] = model
        self._row_id, self._token, self._lease, self._every = row_id, token, lease, every
        self.lost = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._done = False

    async def __aenter__(self) -> Heartbeat[Leased]:
        # A timer, not a task that sleeps: most work ends long before the first beat
        # (a card update, a resume), and a task would be created, started and
        # cancelled for each of them (three per decision).
        self._timer = asyncio.get_running_loop().call_later(self._every, self._due)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._done = True
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:  # a renewal under way: abandon it, as the work ended
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _due(self) -> None:
        self._timer = None
        self._task = asyncio.ensure_future(self._beat())

    async def _beat(self) -> None:
        """One renewal; the next is scheduled unless the row is lost or the work ended."""
        try:
            ours = await asyncio.to_thread(self._renew)
        except Exception:
            log.warning("lease renewal failed; retrying at the next beat", exc_info=True,
                        extra={"table": self._model.__tablename__, "row": self._row_id})
            ours = True
        self._task = None
        if not ours:
            log.warning("lease lost: another worker took the row over",
                        extra={"table": self._model.__tablename__, "row": self._row_id})
            self.lost.set()
        elif not self._done:
            self._timer = asyncio.get_running_loop().call_later(self._every, self._due)

    def _renew(self) -> bool:
        with self._database.transaction() as session:
            return renew(session, self._model, self._row_id, self._token, self._clock(),
                         self._lease)

    async def guard(self, work: Awaitable[T]) -> T:
        """Await ``work``, cancelling it when the lease is lost (then ``LeaseLost``)."""
        task = asyncio.ensure_future(work)
        lost = asyncio.ensure_future(self.lost.wait())
        try:
            await asyncio.wait({task, lost}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            raise LeaseLost(f"{self._model.__tablename__} row {self._row_id} was taken over")
        return task.result()
