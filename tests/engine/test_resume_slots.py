"""A resume slot is free once the outcome is committed: posting the final answer (a
platform call, slow or stuck) goes on beside the next resume, still exactly once
through the outbox, and ``ResumeWorker.due`` returns only when it is done."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import select

from storage import OutboxItem, ResumeJob
from tests.engine.helpers import ORIGIN, STARTER, alice, make_engine

ANSWER = {"environment": "staging"}


async def test_a_slow_final_answer_does_not_hold_the_next_resume(db_url: str) -> None:
    engine, adapter, _clock = make_engine(db_url)
    for i in range(2):
        await engine.start_run("deploy", f"Deploy v{i}", STARTER, ORIGIN)
    for card, _ in list(adapter.delivered):
        assert (await engine.respond(card.ref, alice(), "approve", ANSWER)).outcome == "accepted"
    stuck, released = asyncio.Event(), asyncio.Event()
    post = adapter.post_run_result

    async def slow_post(*args: Any, **kwargs: Any) -> None:
        if not stuck.is_set():  # the first final answer hangs until released
            stuck.set()
            await released.wait()
        await post(*args, **kwargs)

    adapter.post_run_result = slow_post  # type: ignore[method-assign]
    rounds = asyncio.create_task(engine.resumes.due(10, concurrency=1))
    await asyncio.wait_for(stuck.wait(), 10)

    def jobs_done() -> int:
        with engine.db.read() as s:
            return sum(1 for state in s.scalars(select(ResumeJob.state)) if state == "done")

    async def second_posted() -> None:
        while jobs_done() < 2 or len(adapter.results) < 1:
            assert not rounds.done()
            await asyncio.sleep(0.01)

    # one slot, yet the second run resumed and its answer is posted past the stuck one
    await asyncio.wait_for(second_posted(), 10)
    assert len(adapter.results) == 1 and not rounds.done()  # due waits for the post
    released.set()
    assert await asyncio.wait_for(rounds, 10) == 2
    assert len(adapter.results) == 2
    with engine.db.read() as s:
        posts = s.scalars(select(OutboxItem.state)
                          .where(OutboxItem.kind == "post_run_result")).all()
    assert posts == ["done", "done"]  # each final answer once
    engine.db.dispose()
