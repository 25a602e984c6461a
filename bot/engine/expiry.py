"""Set-based expiry: time out a chunk of overdue requests in one transaction.

One ``UPDATE … RETURNING`` (PostgreSQL, and SQLite ≥ 3.35) moves every due request of
the chunk from ``pending`` to Dify's exact timeout result; the ``status == pending``
condition is the same compare-and-set as a person's answer, so each request is
decided once even when a click or another replica's sweep races the sweep. The
resume jobs, audit rows and ``update_card`` outbox rows of the chunk are then added
in the same transaction, so they commit with the decisions or not at all: each by one
``INSERT … SELECT`` over the chunk's ids, so the database copies run, ref and version
from the rows it just updated and Python builds, binds and encodes no row (that was
half of a sweep's CPU: 10,000 timeouts cost ~0.35 s of CPU instead of ~0.73 s).

The rules of the one-at-a-time path hold here too:

* a request with a stored, undecided click received before its deadline is skipped
  (``inbox.undecided_before_deadline``): the click is decided first;
* requests of one model step (a ``batch``) resume their run once, after the last of
  them resolved (``store.batch_resolved``'s rule, applied to the whole chunk);
* the card updates are queued, not attempted inline: the outbox loop sends them
  concurrently, so 10,000 expiries cost one transaction per chunk, not 50,000.

On PostgreSQL the chunk is picked with ``FOR UPDATE SKIP LOCKED``, so two replicas
sweeping at once take disjoint chunks instead of waiting on each other's rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import (
    JSON,
    ColumnElement,
    DateTime,
    Insert,
    Table,
    bindparam,
    func,
    insert,
    literal,
    literal_column,
    not_,
    null,
    select,
    update,
)
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import BindParameter

from bot.askhuman.schema import timeout_result
from bot.engine import inbox, queued, store, tracing, waiters
from storage import HumanRequest, OutboxItem, ResumeJob, Run

CHUNK = 1000
"""Requests timed out per transaction: big enough to amortize the commit, small
enough that memory stays flat and clicks are not held up for long (a chunk holds
SQLite's write lock for ~35 ms of CPU; a click waits for one chunk at most)."""

# The rows a chunk queues, written by the database from the requests it just timed out
# (one ``INSERT … SELECT`` each, over the chunk's ids): no row is built, bound or
# encoded in Python, which was most of a sweep's CPU.
_REQUESTS = cast(Table, HumanRequest.__table__)
_NOW = bindparam("now", type_=DateTime())
_IDS: BindParameter[int] = bindparam("ids", expanding=True)
_RESUME_JOBS = insert(cast(Table, ResumeJob.__table__)).from_select(
    ["request_id", "run_id", "state", "attempts", "next_attempt_at", "lease_until",
     "claim_token", "holder", "last_error", "created_at", "updated_at"],
    select(_REQUESTS.c.id, _REQUESTS.c.run_id, literal("queued"), literal(0), _NOW, null(),
           null(), null(), null(), _NOW, _NOW)
    .where(_REQUESTS.c.id.in_(_IDS)).order_by(_REQUESTS.c.deadline, _REQUESTS.c.id))


def _card_updates(payload: ColumnElement[object]) -> Insert:
    """Queued (unclaimed) ``update_card`` rows, ``payload`` ``{"ref", "version"}`` (the
    version the chunk wrote): the outbox loop sends them."""
    return insert(cast(Table, OutboxItem.__table__)).from_select(
        ["kind", "request_id", "run_id", "platform", "payload", "state", "attempts",
         "next_attempt_at", "lease_until", "claim_token", "holder", "last_error",
         "created_at", "updated_at"],
        select(literal("update_card"), _REQUESTS.c.id, _REQUESTS.c.run_id, null(), payload,
               literal("queued"), literal(0), _NOW, null(), null(), null(), null(), _NOW, _NOW)
        .where(_REQUESTS.c.id.in_(_IDS)).order_by(_REQUESTS.c.deadline, _REQUESTS.c.id))


_KEYS: tuple[ColumnElement[Any], ...] = (
    literal_column("'ref'"), _REQUESTS.c.ref, literal_column("'version'"), _REQUESTS.c.version)
_CARD_UPDATES = _card_updates(func.json_object(*_KEYS, type_=JSON))
_CARD_UPDATES_PG = _card_updates(func.json_build_object(*_KEYS, type_=JSON))


@dataclass(frozen=True)
class Expired:
    """One request the chunk timed out (its row after the update)."""

    id: int
    ref: str
    run_id: str
    batch: str | None
    version: int
    route: str
    created_at: dt.datetime


def expire_chunk(session: Session, now: dt.datetime, postgres: bool,
                 limit: int = CHUNK,
                 notify: Callable[[Session, list[int]], object] | None = None) -> list[Expired]:
    """Time out up to ``limit`` due requests; queue their resumes, audits and card
    updates (and, through ``notify(session, ids)``, any ``on_timeout`` notices).
    Returns the requests this transaction decided."""
    due = (select(HumanRequest.id)
           .where(HumanRequest.status == store.OPEN, HumanRequest.deadline <= now,
                  not_(inbox.undecided_before_deadline()))
           .order_by(HumanRequest.deadline, HumanRequest.id).limit(limit))
    if postgres:
        due = due.with_for_update(skip_locked=True)
    result = timeout_result()
    traced = tracing.on()  # the spans' columns are read back only when they are emitted
    spanned = (HumanRequest.kind, HumanRequest.trace_context) if traced else ()
    rows = session.execute(
        update(HumanRequest)
        .where(HumanRequest.id.in_(due.scalar_subquery()), HumanRequest.status == store.OPEN)
        .values(status=result.status, result=result.model_dump(mode="json"),
                action_id=result.action.id if result.action else None,
                decided_by_platform=None, decided_by_user=None, decided_by_name=None,
                decided_at=now, version=HumanRequest.version + 1, updated_at=now)
        .returning(HumanRequest.id, HumanRequest.ref, HumanRequest.run_id,
                   HumanRequest.batch, HumanRequest.version, HumanRequest.route,
                   HumanRequest.created_at, *spanned)
        .execution_options(synchronize_session=False)
    ).all()
    expired = [Expired(*row[:7]) for row in rows]
    if not expired:
        return []
    if traced:
        tracing.timed_out(session, [tracing.Resolution(row[1], row[5], row[7], row[6], row[8])
                                    for row in rows],
                          result.status, result.action.id if result.action else None, now)
    for request in expired:
        waiters.mark(session, request.ref)
    ids = [r.id for r in expired]
    store.audit_requests(session, now, "timed_out", ids, reason=result.message)
    jobs = _resume_job_ids(session, expired, postgres)
    connection = store.core(session)  # prebuilt Core statements, no ORM path
    if jobs:
        connection.execute(_RESUME_JOBS, {"now": now, "ids": jobs})
        queued.resumes(session)
    connection.execute(_CARD_UPDATES_PG if postgres else _CARD_UPDATES, {"now": now, "ids": ids})
    queued.outbox_rows(session)  # the outbox loop sends the card updates concurrently
    if notify is not None:
        notify(session, ids)
    session.flush()
    return expired


def sweep_chunk(session: Session, now: dt.datetime, postgres: bool, owed: bool,
                limit: int = CHUNK,
                notify: Callable[[Session, list[int]], object] | None = None) -> list[Expired]:
    """``expire_chunk`` as one step of a sweep: a full chunk (more may follow) wakes no
    loop; the sweep's last chunk wakes the resume and outbox loops, also for the chunks
    before it (``owed``). So 10,000 deadlines passing at once are all resolved before
    their resumes and card updates start competing with the sweep for the write lock
    and the process's one core; they follow right after (about a second later)."""
    expired = expire_chunk(session, now, postgres, limit, notify)
    if len(expired) >= limit:  # (PostgreSQL's sub-SELECT may take more than the limit)
        queued.taken(session)  # noted again by the last chunk
    elif owed:
        queued.resumes(session)
        queued.outbox_rows(session)
    return expired


def next_deadline(session: Session, now: dt.datetime) -> dt.datetime | None:
    """The earliest deadline still ahead of ``now`` among pending requests (one read of
    the ``(status, deadline)`` index): when the sweep has work next. Overdue requests
    the sweep skipped (a stored click decides them first) are not counted, so they never
    make the sweep spin; the poll interval looks at them again."""
    return session.scalar(select(func.min(HumanRequest.deadline))
                          .where(HumanRequest.status == store.OPEN,
                                 HumanRequest.deadline > now))


def _resume_job_ids(session: Session, expired: list[Expired], postgres: bool) -> list[int]:
    """The requests whose resume job is due now: one per run step that is now fully
    resolved (see ``store.batch_resolved``), carried by the step's last request."""
    steps: dict[tuple[str, str], Expired] = {}
    jobs = []
    for request in expired:
        if request.batch is None:
            jobs.append(request.id)
        else:
            steps[(request.run_id, request.batch)] = request  # the last one carries the job
    if steps and postgres:  # as batch_resolved: lock the runs, so a sibling answered now
        runs = sorted({run_id for run_id, _ in steps})  # cannot also see us as pending
        session.execute(select(Run.id).where(Run.id.in_(runs)).order_by(Run.id)
                        .with_for_update())
    still_open = _open_steps(session, list(steps))
    jobs += [request.id for key, request in steps.items() if key not in still_open]
    return jobs


def _open_steps(session: Session, steps: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """The ``(run_id, batch)`` pairs among ``steps`` that still have a pending request."""
    found: set[tuple[str, str]] = set()
    for start in range(0, len(steps), 500):
        part = steps[start:start + 500]
        runs = {run_id for run_id, _ in part}
        query = (select(HumanRequest.run_id, HumanRequest.batch, func.count())
                 .where(HumanRequest.run_id.in_(runs), HumanRequest.status == store.OPEN,
                        HumanRequest.batch.is_not(None))
                 .group_by(HumanRequest.run_id, HumanRequest.batch))
        wanted = set(part)
        found |= {(run_id, str(batch)) for run_id, batch, _ in session.execute(query)
                  if (run_id, batch) in wanted}
    return found
