"""Resumes run several at a time, on several replicas, and still exactly once each."""

from __future__ import annotations

import asyncio
from collections import Counter

from sqlalchemy import select

from storage import AuditLog, ResumeJob, Run
from tests.engine.helpers import ORIGIN, STARTER, alice, make_engine


async def test_a_pool_of_resumes_on_two_replicas_resumes_each_run_once(db_url: str) -> None:
    engine, adapter, clock = make_engine(db_url)
    other, other_adapter, _ = make_engine(db_url, clock=clock)
    runs = [await engine.start_run("deploy", f"Deploy v1.{i}", STARTER, ORIGIN)
            for i in range(12)]
    clock.advance(30 * 60 + 1)
    assert await engine.expire_due() == 12
    done = await asyncio.gather(engine.resumes.due(50, concurrency=4),
                                other.resumes.due(50, concurrency=4),
                                engine.resumes.due(50, concurrency=3))
    assert sum(done) == 12
    with engine.db.transaction() as s:
        resumed = Counter(s.scalars(select(AuditLog.run_id).where(AuditLog.event == "resumed")))
        assert resumed == Counter({run_id: 1 for run_id in runs})
        assert set(s.scalars(select(ResumeJob.state))) == {"done"}
        assert set(s.scalars(select(Run.status))) == {"succeeded"}
    posted = [text for _, text in adapter.results + other_adapter.results]
    assert len(posted) == 12 and all("No approval" in text for text in posted)


async def test_the_pool_never_takes_more_than_its_limit(db_url: str) -> None:
    engine, _, clock = make_engine(db_url)
    for i in range(5):
        await engine.start_run("deploy", f"Deploy v2.{i}", STARTER, ORIGIN)
    clock.advance(30 * 60 + 1)
    await engine.expire_due()
    assert await engine.resumes.due(3, concurrency=8) == 3
    assert await engine.resumes.due(50, concurrency=8) == 2


async def test_a_decision_on_one_replica_wakes_the_other_at_once(postgres_url: str) -> None:
    """On PostgreSQL the resume loop wakes on NOTIFY, not on its (here 60 s) poll."""
    deciding, deciding_adapter, clock = make_engine(postgres_url)
    serving, serving_adapter, _ = make_engine(postgres_url, clock=clock)
    await deciding.start_run("deploy", "Deploy v3.0", STARTER, ORIGIN)
    stop = asyncio.Event()
    worker = asyncio.create_task(serving.serve_forever(stop, poll_interval=60.0))
    try:
        for _ in range(100):  # the first round ran; the listener is connected
            if serving.waiters.listening:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        card = deciding_adapter.delivered[0][0]
        answer = await deciding.respond(card.ref, alice(), "approve", {"environment": "staging"})
        assert answer.outcome == "accepted"
        for _ in range(100):
            if serving_adapter.results:
                break
            await asyncio.sleep(0.05)
        assert serving_adapter.results and "Deployed" in serving_adapter.results[0][1]
        assert not deciding_adapter.results  # the deciding replica ran no worker
    finally:
        stop.set()
        await asyncio.wait_for(worker, 10)

