"""Where the engine's lookups run (``Committer.read``).

On SQLite a lookup runs on the event loop itself: a WAL snapshot never waits for a
writer, so it cannot stall the loop behind a write transaction, and the hop to a worker
thread cost more CPU than the lookup. On PostgreSQL a lookup waits for the network, so
it runs on a worker thread.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from sqlalchemy import select, update

from bot.engine import store
from bot.engine.inbox import Click
from storage import HumanRequest
from tests.engine.helpers import ORIGIN, STARTER, alice, make_engine


async def test_a_lookup_runs_on_the_loop_on_sqlite_and_on_a_worker_on_postgres(
    db_url: str,
) -> None:
    engine, _, _ = make_engine(db_url)
    ran_on = await engine.committer.read(lambda _s: threading.get_ident())
    on_loop = ran_on == threading.get_ident()
    assert on_loop is (not engine.db.is_postgres)
    engine.db.dispose()


async def test_a_lookup_on_the_loop_does_not_wait_for_a_writer_holding_the_lock(
    tmp_path: object,
) -> None:
    """A write transaction holds SQLite's write lock (and askhuman's ``WriterLock``) on
    another thread for a second; meanwhile lookups on the loop return at once with the
    last committed state, and the loop's other tasks keep running."""
    engine, adapter, _ = make_engine(f"sqlite:///{tmp_path}/askhuman.db")
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    holding, release = threading.Event(), threading.Event()

    class RollBack(Exception):
        pass

    def writer() -> None:
        try:
            with engine.db.transaction() as session:
                session.execute(update(HumanRequest).where(HumanRequest.ref == ref)
                                .values(status="cancelled"))
                session.flush()
                holding.set()
                release.wait(5)
                raise RollBack
        except RollBack:
            pass

    thread = threading.Thread(target=writer)
    thread.start()
    assert await asyncio.to_thread(holding.wait, 5)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    started = time.monotonic()
    statuses = [await engine.committer.read(lambda s: s.scalar(
        select(HumanRequest.status).where(HumanRequest.ref == ref))) for _ in range(20)]
    took = time.monotonic() - started
    await asyncio.sleep(0.1)
    release.set()
    await asyncio.to_thread(thread.join)
    ticker.cancel()
    assert statuses == [store.OPEN] * 20  # the writer's change is not committed
    assert took < 0.5, f"20 lookups took {took:.2f} s beside a writer"
    assert ticks >= 3  # the loop ran its other tasks
    engine.db.dispose()


async def test_clicks_that_arrive_while_a_shared_precheck_read_runs_join_the_next(
    tmp_path: object,
) -> None:
    """The pre-check's snapshot reads are shared: while one runs (aside, on a worker
    thread, even on SQLite), the loop goes on taking clicks, which are read together
    next. Inline, the first read would stall the loop and every click read alone."""
    engine, adapter, _ = make_engine(f"sqlite:///{tmp_path}/askhuman.db")
    for i in range(6):
        await engine.start_run("deploy", f"Deploy v{i}", STARTER, ORIGIN)
    refs = [card.ref for card, _ in adapter.delivered]
    batches: list[int] = []
    read_all = engine.click_check._read_all

    def slow(keys: list[tuple[str, str, str]], session: Any) -> Any:
        batches.append(len(keys))
        time.sleep(0.3)
        return read_all(keys, session)

    engine.click_check._read_all = slow  # type: ignore[method-assign]

    def click(ref: str) -> Click:
        return Click("slack", ref, alice(), "approve", {"environment": "staging"})

    first = asyncio.create_task(engine.click_check.check(click(refs[0])))
    started = time.monotonic()
    await asyncio.sleep(0.05)
    assert time.monotonic() - started < 0.25  # the loop ran while the read was out
    rest = [asyncio.create_task(engine.click_check.check(click(ref))) for ref in refs[1:]]
    checked = await asyncio.gather(first, *rest)
    assert batches == [1, 5]
    assert all(c.refusal is None for c in checked)  # all open, alice may answer
    engine.db.dispose()
