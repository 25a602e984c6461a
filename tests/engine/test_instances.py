"""A dead holder's rows are taken over as soon as its heartbeat is stale, a live one's
never are, and a holder that never registered falls back to its lease (two engines on
one database stand for two processes; both databases)."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import func, select

from bot.engine import Engine
from storage import AuditLog, ClickInbox, Instance, OutboxItem, ResumeJob
from tests.engine.helpers import ORIGIN, STARTER, FakeClock, FakeDirectory, alice, make_engine
from tests.engine.test_click_inbox import TellingAdapter, _click
from tests.engine.test_click_inbox import _engine as engine_with_told


def _count(engine: Engine, model: Any, *where: Any) -> int:
    with engine.db.transaction() as s:
        return int(s.scalar(select(func.count()).select_from(model).where(*where)) or 0)


def _pair(db_url: str) -> tuple[Engine, Engine, TellingAdapter, FakeClock]:
    """Two engines ('processes') on one database and one clock; the first delivers."""
    first, told, clock = engine_with_told(db_url)
    second, _, _ = make_engine(db_url, clock=clock)
    second.register_adapter(told, FakeDirectory())
    return first, second, told, clock


async def _stale(first: Engine, clock: FakeClock) -> None:
    """``first`` beat once, then stopped beating (killed) for longer than the limit."""
    await first.instances.beat()
    clock.advance(first.tuning.holder_stale.total_seconds() + 0.5)


async def test_a_dead_holders_click_is_taken_over_before_its_lease_runs_out(db_url: str) -> None:
    first, second, told, clock = _pair(db_url)
    await first.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = told.delivered[-1][0].ref
    assert await first.record_click(_click(ref)) is not None  # acked, then killed
    await _stale(first, clock)
    with second.db.transaction() as s:  # its lease still runs
        assert s.scalars(select(ClickInbox.lease_until)).one() > second.now()
    assert await second.instances.beat() == 1  # the survivor's beat notices the death
    assert second.wakeups.clicks.is_set() and second.wakeups.outbox.is_set()
    assert await second.recover_clicks() == 1
    assert _count(second, AuditLog, AuditLog.event == "decided") == 1
    with second.db.transaction() as s:
        assert s.scalars(select(ClickInbox.holder)).one() == second.ctx.instance_id
    assert [t[2] for t in told.told] == ["Thanks, your answer (Approve) was recorded."]


async def test_a_live_holders_rows_are_never_taken(db_url: str) -> None:
    first, second, told, clock = _pair(db_url)
    await first.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = told.delivered[-1][0].ref
    assert await first.record_click(_click(ref)) is not None
    for _ in range(3):  # slow, but beating: well past the stale limit in all
        await first.instances.beat()
        clock.advance(first.tuning.holder_stale.total_seconds() * 0.75)
        assert await second.instances.beat() == 0
        assert await second.recover_clicks() == 0
    assert _count(second, AuditLog, AuditLog.event == "decided") == 0


async def test_an_unregistered_holder_falls_back_to_its_lease(db_url: str) -> None:
    first, second, told, clock = _pair(db_url)
    await first.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = told.delivered[-1][0].ref
    assert await first.record_click(_click(ref)) is not None  # first never beat
    clock.advance(first.tuning.holder_stale.total_seconds() + 1)
    await second.instances.beat()
    assert await second.recover_clicks() == 0
    clock.advance(first.tuning.click_lease.total_seconds())
    assert await second.recover_clicks() == 1


async def test_a_dead_holders_outbox_rows_and_resume_jobs_are_taken_over(db_url: str) -> None:
    first, second, told, clock = _pair(db_url)
    await first.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = told.delivered[-1][0].ref
    await first.instances.beat()

    async def never(_claims: object) -> None:  # the process dies before its post-commit try
        return None

    first.outbox.after_commit = never  # type: ignore[method-assign]
    assert (await first.respond(ref, alice(), "approve", {"environment": "staging"})).outcome \
        == "accepted"
    with first.db.transaction() as s:  # and mid-resume: it had claimed the job
        s.execute(ResumeJob.__table__.update().values(
            state="running", holder=first.ctx.instance_id, claim_token="first",
            lease_until=clock.now + first.tuning.lease))
    running = _count(first, OutboxItem, OutboxItem.state == "running",
                     OutboxItem.holder == first.ctx.instance_id)
    assert running >= 1
    assert await second.run_worker_once() == 0  # alive as far as anyone knows
    clock.advance(first.tuning.holder_stale.total_seconds() + 0.5)
    assert await second.instances.beat() == 1
    assert await second.run_worker_once() == 1  # the resume, after the side effects
    assert _count(second, OutboxItem, OutboxItem.state == "running") == 0
    assert told.updates, "the card update the dead process held was sent"
    assert _count(second, AuditLog, AuditLog.event == "resumed") == 1


async def test_a_process_presumed_dead_comes_back_and_is_reaped_only_once(db_url: str) -> None:
    first, second, _, clock = _pair(db_url)
    await first.instances.beat()
    clock.advance(first.tuning.holder_stale.total_seconds() + 0.5)
    assert await second.instances.beat() == 1
    assert await second.instances.beat() == 0  # reaped once, not at every beat
    await first.instances.beat()  # it was only frozen: it beats again
    with first.db.transaction() as s:
        row = s.get(Instance, first.ctx.instance_id)
        assert row is not None and row.stopped_at is None and row.heartbeat_at == first.now()


async def test_serve_forever_beats_while_it_runs_and_signs_off_when_it_stops(db_url: str) -> None:
    engine, _, _ = make_engine(db_url)
    engine.tuning.instance_beat = 0.05
    stop = asyncio.Event()
    worker = asyncio.create_task(engine.serve_forever(stop, poll_interval=0.05))
    while _count(engine, Instance) == 0:
        await asyncio.sleep(0.02)
    with engine.db.transaction() as s:
        assert s.scalars(select(Instance.stopped_at)).one() is None
    stop.set()
    await asyncio.wait_for(worker, 10)
    with engine.db.transaction() as s:  # what it still held is free for the others now
        assert s.scalars(select(Instance.stopped_at)).one() is not None
