"""Short leases kept alive by a heartbeat: a slow live worker keeps its resume, a dead
one's is taken over within about one lease (real processes, real clock, both databases)."""

from __future__ import annotations

import asyncio
import datetime as dt
import signal
import time
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bot.engine import Engine, leases
from storage import AuditLog, OutboxItem, ResumeJob
from tests.engine.helpers import ORIGIN, STARTER, alice, make_engine
from tests.engine.model_agents import RealClock, model_runtime
from tests.engine.test_concurrency import _child

LEASE = 1.0
BEAT = 0.2


def _count(engine: Engine, model: object, *where: object) -> int:
    with engine.db.transaction() as s:
        return int(s.scalar(select(func.count()).select_from(model).where(*where)) or 0)


async def test_slow_resume_is_never_run_twice_by_two_workers(db_url: str) -> None:
    resumes: list[float] = []

    async def slow(_messages: object) -> str:
        resumes.append(time.monotonic())
        await asyncio.sleep(LEASE * 3)  # a model call three leases long
        return "shipped"

    runtime = model_runtime(slow)
    knobs = {"lease_seconds": LEASE, "outbox_lease_seconds": LEASE, "heartbeat_seconds": BEAT}
    one, adapter_one, _ = make_engine(db_url, fake=runtime, clock=RealClock(), **knobs)
    two, adapter_two, _ = make_engine(db_url, fake=runtime, clock=RealClock(), **knobs)
    await one.start_run("form", "ship", STARTER, ORIGIN)
    ref = adapter_one.delivered[0][0].ref
    assert (await one.respond(ref, alice(), "approve", {})).outcome == "accepted"

    first = asyncio.create_task(one.run_worker_once())
    while not resumes:
        await asyncio.sleep(0.02)
    ran_by_two = 0
    while not first.done():  # the other worker keeps sweeping during the slow call
        ran_by_two += await two.run_worker_once()
        await asyncio.sleep(0.1)
    assert await first == 1
    assert ran_by_two == 0 and len(resumes) == 1
    assert adapter_one.results == [(ORIGIN, "shipped")] and adapter_two.results == []
    assert _count(one, AuditLog, AuditLog.event == "resumed") == 1
    assert await one.job_states() == {"done": 1}


async def test_worker_that_lost_its_lease_cancels_the_call_and_commits_nothing(
    db_url: str,
) -> None:
    """Fencing: if the row is taken over anyway (the database stalled the heartbeat
    past the lease), the old holder's model call is cancelled and its result dropped."""
    cancelled = asyncio.Event()

    async def slow(_messages: object) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    engine, adapter, _ = make_engine(db_url, fake=model_runtime(slow), clock=RealClock(),
                                     lease_seconds=LEASE, heartbeat_seconds=BEAT)
    await engine.start_run("form", "ship", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    await engine.respond(ref, alice(), "approve", {})
    worker = asyncio.create_task(engine.run_worker_once())
    while await engine.job_states() != {"running": 1}:
        await asyncio.sleep(0.02)

    def take_over(session: Session) -> None:  # what another replica's claim does
        job = session.scalars(select(ResumeJob)).one()
        job.claim_token = "someone-else"

    with engine.db.transaction() as session:
        take_over(session)
    await asyncio.wait_for(cancelled.wait(), 5)
    await worker
    assert adapter.results == []
    assert _count(engine, AuditLog, AuditLog.event == "resumed") == 0
    with engine.db.transaction() as session:
        job = session.scalars(select(ResumeJob)).one()
        assert (job.state, job.claim_token) == ("running", "someone-else")


async def test_killed_holder_is_taken_over_within_about_one_lease(
    db_url: str, tmp_path: Path
) -> None:
    engine, adapter, _ = make_engine(db_url, clock=RealClock(), lease_seconds=LEASE,
                                     outbox_lease_seconds=LEASE, heartbeat_seconds=BEAT)
    await engine.start_run("deploy", "Deploy v9.0.0", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    await engine.respond(ref, alice(), "approve", {"environment": "staging"})
    marker = tmp_path / "resuming"
    child = _child("hang-resume", db_url, str(marker), str(LEASE))
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert child.poll() is None, child.communicate()[1]
            assert time.monotonic() < deadline, "child never started resuming"
            await asyncio.sleep(0.05)
        alive_until = time.monotonic() + LEASE * 2.5
        while time.monotonic() < alive_until:  # alive and slow: its heartbeat keeps it
            assert await engine.run_worker_once() == 0
            await asyncio.sleep(0.1)
        child.send_signal(signal.SIGKILL)
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate(timeout=30)  # reaps it and closes its pipes
    killed = time.monotonic()
    while await engine.run_worker_once() == 0:
        assert time.monotonic() - killed < LEASE + 5, "the dead worker's job was not taken over"
        await asyncio.sleep(0.05)
    assert time.monotonic() - killed < LEASE + 1.5
    assert adapter.results[-1][1].startswith("Deployed v9.0.0 to staging")
    assert _count(engine, AuditLog, AuditLog.event == "resumed") == 1


def _running_row(engine: Engine, now: dt.datetime) -> int:
    """An outbox row held (``running``) under the claim token ``mine``; its id."""
    with engine.db.transaction() as session:
        row = OutboxItem(kind="remind", payload={}, state="running", attempts=1,
                         next_attempt_at=now, lease_until=now, claim_token="mine",
                         created_at=now, updated_at=now)
        session.add(row)
        session.flush()
        return row.id


def test_renew_is_a_compare_and_set_on_the_claim_token(db_url: str) -> None:
    engine, _, _ = make_engine(db_url)
    now = engine.now()
    _running_row(engine, now)
    lease = dt.timedelta(seconds=30)
    with engine.db.transaction() as session:
        row = session.scalars(select(OutboxItem)).one()
        assert leases.renew(session, OutboxItem, row.id, "mine", now, lease)
        assert not leases.renew(session, OutboxItem, row.id, "theirs", now, lease)
    with engine.db.transaction() as session:
        row = session.scalars(select(OutboxItem)).one()
        assert row.lease_until == now + lease
        row.state = "done"
    with engine.db.transaction() as session:
        assert not leases.renew(session, OutboxItem, row.id, "mine", now, lease)


async def test_a_heartbeat_renews_every_beat_until_its_work_ends_or_the_row_is_lost(
        db_url: str) -> None:
    engine, _, _ = make_engine(db_url)
    start = engine.now()
    row_id = _running_row(engine, start)
    renewals: list[dt.datetime] = []

    def clock() -> dt.datetime:  # each renewal pushes the lease one minute further
        renewals.append(start + dt.timedelta(minutes=len(renewals) + 1))
        return renewals[-1]

    def lease_until() -> dt.datetime:
        with engine.db.transaction() as session:
            return session.scalars(select(OutboxItem.lease_until)).one()

    lease = dt.timedelta(seconds=30)
    async with leases.Heartbeat(engine.db, clock, OutboxItem, row_id, "mine", lease, 0.05) as beat:
        await asyncio.sleep(0.4)
        assert len(renewals) >= 3 and not beat.lost.is_set()
        assert lease_until() == renewals[-1] + lease
    ended = len(renewals)
    await asyncio.sleep(0.2)
    assert len(renewals) == ended  # no beat after the work ended
    theirs = leases.Heartbeat(engine.db, clock, OutboxItem, row_id, "theirs", lease, 0.05)
    async with theirs:
        await asyncio.wait_for(theirs.lost.wait(), 5)  # the row is not ours: lost, no more beats
        after_loss = len(renewals)
        await asyncio.sleep(0.2)
        assert len(renewals) == after_loss
    engine.db.dispose()
