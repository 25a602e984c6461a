"""A commit wakes the loops it queued work for: no caller pokes by hand.

``store.resolve`` and the timeout sweep note the resume jobs and outbox rows they queue
on the transaction (``bot.engine.queued``); the ``Committer`` hands the notes to its
``on_commit`` hook once the transaction has committed, and only then.
"""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from bot.engine import Identity, queued
from tests.engine.helpers import ORIGIN, STARTER, alice, make_engine

QUORUM = {"timeout": "30m", "quorum": 2, "veto": False,
          "slack": {"channel": "C_OPS", "approvers": {"users": ["U_ALICE", "U_BOB"]}}}
ANSWER = {"environment": "production"}


async def test_the_deciding_vote_wakes_the_resume_loop_and_a_mere_vote_does_not(
        db_url: str) -> None:
    engine, adapter, _clock = make_engine(db_url, QUORUM)
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    before = engine.wakeups.pokes
    assert (await engine.respond(ref, alice(), "approve", ANSWER)).outcome == "recorded"
    assert engine.wakeups.pokes == before  # a vote queues no resume
    bob = Identity("slack", "U_BOB", "Bob")
    assert (await engine.respond(ref, bob, "approve", ANSWER)).outcome == "accepted"
    assert engine.wakeups.pokes == before + 1
    assert engine.wakeups.resume.is_set()


async def test_the_timeout_sweep_wakes_the_resume_and_outbox_loops(db_url: str) -> None:
    engine, _adapter, clock = make_engine(db_url)
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    engine.wakeups.fresh_events()
    assert await engine.expire_due() == 0
    assert not engine.wakeups.resume.is_set() and not engine.wakeups.outbox.is_set()
    clock.advance(31 * 60)
    assert await engine.expire_due() == 1
    assert engine.wakeups.resume.is_set() and engine.wakeups.outbox.is_set()


async def test_a_rolled_back_transaction_wakes_nobody(db_url: str) -> None:
    engine, _adapter, _clock = make_engine(db_url)
    before = engine.wakeups.pokes

    def queue_then_fail(session: Session) -> None:
        queued.resumes(session)
        queued.outbox_rows(session)
        raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        await engine.committer.tx(queue_then_fail)
    assert engine.wakeups.pokes == before and not engine.wakeups.outbox.is_set()

    def queue(session: Session) -> None:
        queued.resumes(session)

    await engine.committer.tx(queue)
    assert engine.wakeups.pokes == before + 1
