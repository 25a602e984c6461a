"""What a resume costs the database: one statement claims a batch of jobs, one reads
their requests with their runs, and the outcome's commit re-reads nothing it holds."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import partial
from typing import Any

from sqlalchemy import event, select

from storage import AuditLog, ResumeJob
from tests.engine.helpers import ORIGIN, STARTER, alice, make_engine


@contextlib.contextmanager
def _statements(engine: Any) -> Iterator[list[str]]:
    """The SQL statements sent while the block runs (transaction control excluded)."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not statement.lstrip().upper().startswith(("BEGIN", "COMMIT", "SAVEPOINT",
                                                       "RELEASE")):
            seen.append(" ".join(statement.split()))

    event.listen(engine.db.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine.db.engine, "before_cursor_execute", record)


async def _decided(db_url: str, runs: int) -> Any:
    engine, adapter, _ = make_engine(db_url)
    for i in range(runs):
        await engine.start_run("deploy", f"Deploy v7.{i}", STARTER, ORIGIN)
    for card, _ in list(adapter.delivered):
        answer = await engine.respond(card.ref, alice(), "approve", {"environment": "staging"})
        assert answer.outcome == "accepted"
    await engine.drain()
    return engine, adapter


async def test_claiming_a_batch_is_one_update_and_one_read(db_url: str) -> None:
    engine, _ = await _decided(db_url, 3)
    with _statements(engine) as sent:
        batch = await engine.committer.batched(partial(engine.resumes.claim_loaded, limit=3))
    assert len(batch) == 3 and all(loaded is not None for _, loaded in batch)
    assert len(sent) == 2, sent
    assert sent[0].startswith(("UPDATE resume_jobs", "WITH picked"))
    assert "RETURNING" in sent[0]
    assert sent[1].startswith("SELECT") and "JOIN runs" in sent[1]
    for claim, (run, request, _inputs) in batch:
        assert run.id == claim.run_id and request.id == claim.request_id
        assert claim.token.endswith(f":{claim.job_id}")  # a fencing token per job
    assert len({claim.token for claim, _ in batch}) == 3


async def test_the_outcome_commit_does_not_read_the_run_again(db_url: str) -> None:
    engine, adapter = await _decided(db_url, 1)
    [(claim, loaded)] = await engine.committer.batched(
        partial(engine.resumes.claim_loaded, limit=1))
    with _statements(engine) as sent:
        await engine.resumes.process(claim, loaded)
    assert not [s for s in sent if s.startswith("SELECT")], sent
    assert [s.split()[0:3] for s in sent if "runs" in s.split()[0:3]] == [
        ["UPDATE", "runs", "SET"]]
    assert len(adapter.results) == 1 and "Deployed v7.0" in adapter.results[0][1]
    with engine.db.read() as s:
        assert list(s.scalars(select(ResumeJob.state))) == ["done"]
        events = list(s.scalars(select(AuditLog.event).where(AuditLog.run_id == claim.run_id)))
    assert events.count("resumed") == 1 and events.count("run_succeeded") == 1


async def test_a_finished_resume_writes_its_audit_rows_in_one_statement(db_url: str) -> None:
    """``run_succeeded`` and ``resumed`` go in together (one executemany / multi-row
    INSERT), in that order, each with its own content."""
    engine, _ = await _decided(db_url, 1)
    [(claim, loaded)] = await engine.committer.batched(
        partial(engine.resumes.claim_loaded, limit=1))
    with _statements(engine) as sent:
        await engine.resumes.process(claim, loaded)
    assert len([s for s in sent if s.startswith("INSERT INTO audit_log")]) == 1, sent
    with engine.db.read() as s:
        rows = list(s.execute(select(AuditLog.event, AuditLog.request_ref, AuditLog.details)
                              .where(AuditLog.run_id == claim.run_id,
                                     AuditLog.event.in_(("run_succeeded", "resumed")))
                              .order_by(AuditLog.id)))
    assert [row.event for row in rows] == ["run_succeeded", "resumed"]
    assert rows[0].request_ref is None and rows[1].request_ref == loaded[1].ref
    assert rows[1].details == {"attempt": 1, "status": "submitted"}


async def test_a_run_already_in_the_transaction_is_reused_not_overwritten(
    db_url: str,
) -> None:
    """A batch-mate of the commit may have read or changed the run in the same
    transaction: the outcome then lands on that copy, not on the stale detached one."""
    from bot.agents.base import Outcome
    from storage import Run

    engine, _ = await _decided(db_url, 1)
    [(_claim, (run, _request, _inputs))] = await engine.committer.batched(
        partial(engine.resumes.claim_loaded, limit=1))

    def commit(session: Any) -> None:
        mine = session.get(Run, run.id)
        mine.error = "noted by a batch-mate"
        engine.outcomes.apply(session, run.id, Outcome.finished("done", {"x": 1}), known=run)
        assert mine.status == "succeeded" and mine.snapshot == {"x": 1}

    await engine.committer.grouped(commit)
    with engine.db.read() as s:
        stored = s.get(Run, run.id)
        assert stored is not None
        assert (stored.status, stored.error, stored.output) == (
            "succeeded", "noted by a batch-mate", "done")
