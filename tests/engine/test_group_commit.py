"""Decisions, resume claims and resume outcomes share commits (``Committer.grouped``),
and every caller still sees its own write committed, and its side effects sent."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time
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
    """Count committed transactions from now on, wherever they run (the event loop or
    the committer thread): one entry per COMMIT."""
    from sqlalchemy import event

    calls: list[int] = []
    event.listen(engine.db.engine, "commit", lambda _conn: calls.append(1))
    return calls


async def test_concurrent_decisions_share_one_commit_and_each_sends_its_card(
    db_url: str,
) -> None:
    engine, adapter, _ = make_engine(db_url)
    for i in range(6):
        await engine.start_run("deploy", f"Deploy v5.{i}", STARTER, ORIGIN)
    refs = [card.ref for card, _ in adapter.delivered]
    transactions: list[Any] = []  # the transaction each decision ran in

    def decide(session: Any, ref: str) -> Any:
        transactions.append(session.get_transaction())
        return engine.decider.decide(session, ref, alice(), APPROVE, now)

    now = engine.now()
    answers = await asyncio.gather(*(engine.committer.grouped(partial(decide, ref=ref))
                                     for ref in refs))
    assert [a.outcome for a in answers] == ["accepted"] * 6
    assert len(transactions) == 6 and len({id(t) for t in transactions}) == 1  # together ...
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


# ---------------------------------------------------------------- where a batch commits


def _on_file(tmp_path: Any) -> Any:
    engine, _, _ = make_engine(f"sqlite:///{tmp_path / 'askhuman.db'}")
    return engine


async def _batched_thread(engine: Any, tag: str) -> int:
    """Commit one batched audit row; the thread its transaction ran on."""
    ran: list[int] = []

    def write(session: Any) -> None:
        ran.append(threading.get_ident())
        store.audit(session, engine.now(), "probe", reason=tag)

    await engine.committer.batched(write)
    with engine.db.read() as s:
        assert s.scalar(select(AuditLog.reason).where(AuditLog.reason == tag)) == tag
    return ran[0]


async def test_a_batch_commits_on_the_event_loop_when_the_write_lock_is_free(
        tmp_path: Any) -> None:
    engine = _on_file(tmp_path)
    assert await _batched_thread(engine, "free") == threading.get_ident()
    engine.db.dispose()


async def test_a_batch_waits_for_a_held_write_lock_on_its_thread_not_the_loop(
        tmp_path: Any) -> None:
    """Another process holding the write lock (its ``flock``): the batch goes to the
    committer thread, the loop goes on meanwhile, and the write lands once it is free."""
    import fcntl
    import os

    engine = _on_file(tmp_path)
    other = os.open(f"{tmp_path / 'askhuman.db'}-writer", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(other, fcntl.LOCK_EX)
    try:
        write = asyncio.ensure_future(_batched_thread(engine, "held"))
        ticks = 0
        for _ in range(10):  # the loop is not blocked while the write waits
            await asyncio.sleep(0.02)
            ticks += 1
        assert ticks == 10 and not write.done()
    finally:
        fcntl.flock(other, fcntl.LOCK_UN)
        os.close(other)
    assert await asyncio.wait_for(write, 10) != threading.get_ident()
    assert await _batched_thread(engine, "free again") == threading.get_ident()
    engine.db.dispose()


async def test_a_slow_commit_on_the_loop_sends_the_next_batches_to_the_thread(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.engine import committer

    engine = _on_file(tmp_path)
    loop_thread = threading.get_ident()
    monkeypatch.setattr(committer, "INLINE_COMMIT_LIMIT", 0.02)
    await engine.committer.batched(lambda s: time.sleep(0.03))  # slow steps, a quick COMMIT
    assert await _batched_thread(engine, "steps") == loop_thread  # no pause for that
    monkeypatch.setattr(committer, "INLINE_PAUSE", 1.0)
    monkeypatch.setattr(committer, "INLINE_COMMIT_LIMIT", 0.0)  # every COMMIT is "slow"
    assert await _batched_thread(engine, "slow") == loop_thread
    assert await _batched_thread(engine, "paused") != loop_thread
    monkeypatch.setattr(committer, "INLINE_COMMIT_LIMIT", 0.02)
    await asyncio.sleep(1.05)  # the pause is over
    assert await _batched_thread(engine, "inline again") == loop_thread
    engine.db.dispose()


def test_an_in_memory_or_busy_write_lock_is_never_taken_without_waiting(tmp_path: Any) -> None:
    from storage import Database

    assert Database("sqlite://").free_write_lock() is None  # one shared connection: a thread
    database = Database(f"sqlite:///{tmp_path / 'askhuman.db'}")
    held = database.free_write_lock()
    assert held is not None
    taken: list[object] = []
    worker_thread = threading.Thread(target=lambda: taken.append(database.free_write_lock()))
    worker_thread.start()
    worker_thread.join(10)
    assert taken == [None]  # this process's other threads queue behind it
    held.release()
    database.dispose()


def _outside_writer(tmp_path: Any, seconds: float) -> threading.Thread:
    """A plain ``sqlite3`` connection holding SQLite's write lock for ``seconds`` (no
    ``WriterLock``), started and holding it; join the thread to wait for its end."""
    from tests.fakes.sqlite_lock import hold_write_lock

    held = threading.Event()
    holder = threading.Thread(target=hold_write_lock,
                              args=(tmp_path / "askhuman.db", seconds, held))
    holder.start()
    assert held.wait(5)
    return holder


async def test_a_writer_outside_askhuman_sends_the_batch_to_the_thread_not_the_loop(
        tmp_path: Any) -> None:
    """``sqlite3`` or an older askhuman holds SQLite's own write lock without the
    ``WriterLock``: the loop's attempt gives up at once and the committer thread waits."""
    engine = _on_file(tmp_path)
    holder = _outside_writer(tmp_path, 0.4)
    began = time.monotonic()
    write = asyncio.ensure_future(_batched_thread(engine, "outside"))
    await asyncio.sleep(0.05)
    assert time.monotonic() - began < 0.3 and not write.done()  # the loop goes on
    assert await asyncio.wait_for(write, 10) != threading.get_ident()
    await asyncio.to_thread(holder.join)
    assert await _batched_thread(engine, "after") == threading.get_ident()
    engine.db.dispose()


def test_a_transaction_that_must_not_wait_says_busy_and_the_next_one_waits(
        tmp_path: Any) -> None:
    from storage import Database
    from storage.kept_sessions import WriteLockBusy

    database = Database(f"sqlite:///{tmp_path / 'askhuman.db'}")
    database.upgrade()
    holder = _outside_writer(tmp_path, 0.3)
    began = time.monotonic()
    with pytest.raises(WriteLockBusy), database.transaction_now():
        pass
    assert time.monotonic() - began < 0.2
    with database.transaction() as session:  # this thread's connection waits again
        store.audit(session, dt.datetime.now(dt.UTC), "probe", reason="waited")
    assert time.monotonic() - began >= 0.25
    holder.join()
    with database.transaction_now() as session:  # and no longer says busy
        store.audit(session, dt.datetime.now(dt.UTC), "probe", reason="now")
    with database.read() as s:
        assert set(s.scalars(select(AuditLog.reason))) == {"waited", "now"}
    database.dispose()
