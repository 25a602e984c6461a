"""Decisions, resume claims and resume outcomes share commits (``Committer.grouped``),
and every caller still sees its own write committed, and its side effects sent."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from functools import partial
from typing import Any

import pytest
from sqlalchemy import select

from bot.askhuman.schema import AskHumanSelectedAction, AskHumanToolResult
from bot.engine import store, worker
from storage import AuditLog, HumanRequest, ResumeJob
from tests.engine.helpers import ORIGIN, STARTER, alice, make_engine

APPROVE = AskHumanToolResult(status="submitted",
                             action=AskHumanSelectedAction(id="approve", label="Approve"),
                             values={"environment": "staging"})


def _count_commits(engine: Any) -> list[int]:
    """Count write transactions from now on (one entry per ``db.transaction``)."""
    calls: list[int] = []
    original = engine.db.transaction

    def counting() -> Any:
        calls.append(1)
        return original()

    engine.db.transaction = counting
    return calls


async def test_concurrent_decisions_share_one_commit_and_each_sends_its_card(
    db_url: str,
) -> None:
    engine, adapter, _ = make_engine(db_url)
    for i in range(6):
        await engine.start_run("deploy", f"Deploy v5.{i}", STARTER, ORIGIN)
    refs = [card.ref for card, _ in adapter.delivered]
    sizes: list[int] = []
    commit_batch = engine.committer.commit_batch

    def recording(fns: list[Any]) -> list[tuple[bool, Any]]:
        sizes.append(len(fns))
        return commit_batch(fns)

    engine.committer.commit_batch = recording  # type: ignore[method-assign]
    now = engine.now()
    answers = await asyncio.gather(*(engine.committer.grouped(
        lambda s, ref=ref: engine.decider.decide(s, ref, alice(), APPROVE, now)) for ref in refs))
    assert [a.outcome for a in answers] == ["accepted"] * 6
    assert sizes[0] == 6  # the six decisions were committed together ...
    with engine.db.read() as s:  # ... and every one of them is durable on return
        assert set(s.scalars(select(HumanRequest.status))) == {"submitted"}
        assert len(s.scalars(select(ResumeJob)).all()) == 6
    # Each decision's card update ran after that commit, once per request.
    assert sorted(card.ref for card, _ in adapter.updates) == sorted(refs)
    assert await engine.resumes.due(50, concurrency=4) == 6
    with engine.db.read() as s:
        resumed = Counter(s.scalars(select(AuditLog.request_ref)
                                    .where(AuditLog.event == "resumed")))
    assert resumed == Counter({ref: 1 for ref in refs})
    assert len(adapter.results) == 6


async def test_several_jobs_are_claimed_in_one_transaction_with_their_rows(
    db_url: str,
) -> None:
    engine, _, clock = make_engine(db_url)
    for i in range(5):
        await engine.start_run("deploy", f"Deploy v6.{i}", STARTER, ORIGIN)
    clock.advance(30 * 60 + 1)
    assert await engine.expire_due() == 5
    commits = _count_commits(engine)
    batch = await engine.committer.batched(partial(engine.resumes.claim_loaded, limit=3))
    assert len(commits) == 1 and len(batch) == 3
    assert len({claim.token for claim, _ in batch}) == 3  # one fencing token per job
    for claim, (run, request, (results, _tickets)) in batch:
        assert run.id == claim.run_id and request.id == claim.request_id
        assert [r.status for r in results.values()] == ["timeout"]
    # The claimed jobs are held: another worker gets only the other two.
    other, _, _ = make_engine(db_url, clock=clock)
    assert await other.resumes.due(50, concurrency=8) == 2
    # A claim fences like one taken alone: finishing with a wrong token is refused.
    claim = batch[0][0]
    forged = worker.Claim(claim.job_id, claim.request_id, claim.run_id, "not-ours", 1)
    with pytest.raises(worker.LeaseLost):
        await engine.committer.grouped(lambda s: worker.complete(s, forged, engine.now()))
    for claim, loaded in batch:  # the holder resumes its jobs exactly once
        await engine.resumes.process(claim, loaded)
    with engine.db.read() as s:
        assert set(s.scalars(select(ResumeJob.state))) == {"done"}
        assert len(s.scalars(select(AuditLog).where(AuditLog.event == "resumed")).all()) == 5


def test_callers_on_two_event_loops_are_each_answered_on_their_own(db_url: str) -> None:
    """A flusher settles only its own loop's futures (a lingering one never takes
    another loop's steps), so callers on two loops at once are all answered."""
    engine, _, _ = make_engine(db_url)
    now = engine.now()

    async def burst(tag: str) -> None:
        await asyncio.gather(*(engine.committer.batched(lambda s, i=i: store.audit(
            s, now, "probe", reason=f"{tag}{i}")) for i in range(10)))
        await engine.drain()

    finished: list[str] = []

    def other() -> None:
        asyncio.run(asyncio.wait_for(burst("b"), 20))
        finished.append("b")

    async def main() -> None:
        thread.start()
        await asyncio.wait_for(burst("a"), 20)
        finished.append("a")

    thread = threading.Thread(target=other)
    asyncio.run(main())
    thread.join(30)
    assert sorted(finished) == ["a", "b"]
    with engine.db.read() as s:
        reasons = set(s.scalars(select(AuditLog.reason).where(AuditLog.event == "probe")))
    assert reasons == {f"{tag}{i}" for tag in "ab" for i in range(10)}


def _count_audit_inserts(engine: Any) -> list[int]:
    """The row count of every INSERT into audit_log from now on (one entry per
    statement: an executemany counts once, with all its rows)."""
    from sqlalchemy import event

    sizes: list[int] = []

    def seen(_conn: Any, _cursor: Any, statement: str, parameters: Any, _ctx: Any,
             many: bool) -> None:
        if statement.startswith("INSERT INTO audit_log"):
            sizes.append(len(parameters) if many else 1)

    event.listen(engine.db.engine, "before_cursor_execute", seen)
    return sizes


async def test_a_group_commit_writes_its_steps_audit_rows_in_one_statement_in_order(
    db_url: str,
) -> None:
    engine, _, _ = make_engine(db_url)
    sizes = _count_audit_inserts(engine)
    now = engine.now()

    def step(name: str, session: Any) -> str:
        store.audit(session, now, "test_step", ref=name)
        store.audit(session, now, "test_step_again", ref=name)
        return name

    names = [f"step{i}" for i in range(5)]
    done = await asyncio.gather(*(engine.committer.batched(partial(step, n)) for n in names))
    assert done == names
    assert sizes[0] == 10 and len(sizes) <= 2, sizes  # not one statement per row
    with engine.db.read() as s:
        rows = s.execute(select(AuditLog.request_ref, AuditLog.event)
                         .where(AuditLog.event.like("test_step%"))
                         .order_by(AuditLog.id)).all()
    expected = [(n, e) for n in names for e in ("test_step", "test_step_again")]
    assert [tuple(r) for r in rows] == expected
    engine.db.dispose()


async def test_a_failed_step_loses_only_its_own_audit_rows(db_url: str) -> None:
    """A step that raises fails its batch; the others are retried alone and keep their
    rows, the failed one writes none (its rows were only held, never written)."""
    engine, _, _ = make_engine(db_url)
    now = engine.now()

    def step(name: str, session: Any) -> str:
        store.audit(session, now, "test_held", ref=name)
        if name == "bad":
            raise RuntimeError("this step fails after auditing")
        return name

    results = await asyncio.gather(
        *(engine.committer.batched(partial(step, n)) for n in ("a", "bad", "b")),
        return_exceptions=True)
    assert results[0] == "a" and results[2] == "b"
    assert isinstance(results[1], RuntimeError)
    with engine.db.read() as s:
        refs = list(s.scalars(select(AuditLog.request_ref)
                              .where(AuditLog.event == "test_held").order_by(AuditLog.id)))
    assert refs == ["a", "b"]
    engine.db.dispose()


async def test_a_plain_transaction_still_writes_its_audit_row_at_once(db_url: str) -> None:
    engine, _, _ = make_engine(db_url)
    now = engine.now()

    def write_then_read(session: Any) -> int:
        store.audit(session, now, "test_at_once", ref="x")
        return len(session.scalars(select(AuditLog).where(AuditLog.event == "test_at_once"))
                   .all())

    assert await engine.committer.tx(write_then_read) == 1
    engine.db.dispose()
