"""The timeouts loop wakes when the next deadline passes, not a poll interval later.

After each sweep ``serve_forever`` asks ``Decider.next_expiry_in`` (the earliest
deadline still ahead, by the engine's clock) and sleeps until then when that is
sooner than the poll interval. The tests run the loops with an hour's poll interval:
only a wake at the deadline can time the request out before the test gives up.
"""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest
from sqlalchemy import func, select, update

from bot.engine import expiry
from bot.engine.committer import Committed
from storage import HumanRequest
from tests.engine.expiry_seed import seed
from tests.engine.helpers import ORIGIN, STARTER, make_engine


async def test_the_sweep_wakes_at_the_next_deadline(db_url: str) -> None:
    engine, adapter, clock = make_engine(db_url)
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    with engine.db.transaction() as s:  # due a fifth of a second from now
        s.execute(update(HumanRequest).values(
            deadline=engine.now() + dt.timedelta(seconds=0.2)))
    scheduled: asyncio.Queue[float | None] = asyncio.Queue()
    next_in = engine.decider.next_expiry_in

    async def noted() -> float | None:
        after = await next_in()
        scheduled.put_nowait(after)
        return after

    engine.decider.next_expiry_in = noted  # type: ignore[method-assign]
    stop = asyncio.Event()
    loops = asyncio.create_task(engine.serve_forever(stop, poll_interval=3600))
    try:
        first = await asyncio.wait_for(scheduled.get(), 10)
        assert first is not None and 0.2 <= first < 1  # the deadline, not the hour
        clock.advance(1)  # the deadline passes before the loop wakes
        # the next round: fails here (after 10 s, not an hour) when nothing wakes it
        assert await asyncio.wait_for(scheduled.get(), 10) is None  # nothing ahead now
        with engine.db.read() as s:
            status = s.scalar(select(HumanRequest.status).where(HumanRequest.ref == ref))
        assert status == "timeout"
    finally:
        stop.set()
        await loops
        engine.db.dispose()


async def test_the_next_deadline_is_the_earliest_pending_one_still_ahead(db_url: str) -> None:
    engine, _adapter, _clock = make_engine(db_url)
    now = engine.now()
    assert await engine.decider.next_expiry_in() is None  # nothing pending
    seed(engine.db, now, [("run-a", None, -5), ("run-b", None, 7), ("run-c", None, 3),
                          ("run-d", None, None)])
    with engine.db.transaction() as s:  # decided: its deadline no longer counts
        s.execute(update(HumanRequest).where(HumanRequest.run_id == "run-c")
                  .values(status="approved"))
    with engine.db.read() as s:  # an overdue one the sweep skipped does not make it spin
        assert expiry.next_deadline(s, now) == now + dt.timedelta(minutes=7)
    after = await engine.decider.next_expiry_in()
    assert after is not None and 7 * 60 <= after < 7 * 60 + 1
    engine.db.dispose()


@pytest.mark.parametrize("overdue", [7, 6])  # a short last chunk; an empty one
async def test_a_sweep_of_many_chunks_wakes_the_loops_once_after_its_last_chunk(
        db_url: str, monkeypatch: pytest.MonkeyPatch, overdue: int) -> None:
    """Resumes and card updates start once every due request is resolved, not while the
    sweep still has chunks to go."""
    monkeypatch.setattr(expiry, "CHUNK", 3)
    engine, _adapter, _clock = make_engine(db_url)
    seed(engine.db, engine.now(), [(f"run{i}", None, -1) for i in range(overdue)])
    woken: list[tuple[bool, bool, int]] = []

    async def hook(done: Committed) -> None:
        with engine.db.read() as s:
            pending = s.scalar(select(func.count()).select_from(HumanRequest)
                               .where(HumanRequest.status == "pending"))
        woken.append((done.resumes_queued, done.outbox_queued, pending or 0))

    engine.committer.on_commit(hook)
    assert await engine.expire_due() == overdue
    assert woken == [(True, True, 0)]  # once, when nothing was left pending
    engine.db.dispose()


async def test_a_sweeps_chunks_wake_their_long_polls_but_not_the_resume_loop(
        db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each chunk's commit wakes the long-polls of the requests it timed out at once,
    but announces nothing to the waiters' subscribers (the resume loop subscribes, for
    other replicas' decisions): this process's loops are woken by the commit hook, once,
    after the last chunk. Announcing every chunk started resumes (and the first one's
    agent import, ~1 s) while the sweep still had chunks to go."""
    monkeypatch.setattr(expiry, "CHUNK", 3)
    engine, _adapter, _clock = make_engine(db_url)
    seed(engine.db, engine.now(), [(f"run{i}", None, -1) for i in range(7)], prefix="lp")
    announced: list[int] = []
    unsubscribe = engine.waiters.subscribe(lambda: announced.append(1))
    first = engine.waiters.register("lp000000")  # timed out by the first chunk
    assert await engine.expire_due() == 7
    await asyncio.sleep(0)  # the wake is handed to this loop with call_soon_threadsafe
    assert first.done()
    assert announced == []
    unsubscribe()
    engine.db.dispose()
