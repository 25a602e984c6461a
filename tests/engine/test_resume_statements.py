"""What a resume costs the database: one statement claims a batch of jobs, one reads
their requests with their runs, and the outcome's commit re-reads nothing it holds."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
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


async def test_a_finished_leg_stores_the_same_run_with_or_without_the_orm(
    db_url: str,
) -> None:
    """A resume's final output goes in with one Core UPDATE of the detached run it read
    (``OutcomeRecorder._finish``); a run the transaction holds already, or one not read
    before, goes through the ORM. Both store the same row and post the same text."""
    from bot.agents.base import Outcome
    from storage import OutboxItem, Run

    engine, _ = await _decided(db_url, 2)
    batch = await engine.committer.batched(partial(engine.resumes.claim_loaded, limit=2))
    (_, (core_run, _, _)), (_, (orm_run, _, _)) = batch
    outputs = {core_run.id: {"deployed": ["v7", None]}, orm_run.id: {"deployed": ["v7", None]}}
    snapshot = {"schema_version": 1, "messages": [{"kind": "request"}]}

    def commit(session: Any) -> None:
        engine.outcomes.apply(session, core_run.id, Outcome.finished(
            outputs[core_run.id], snapshot), known=core_run)
        assert session.get(Run, core_run.id, populate_existing=True).status == "succeeded"
        engine.outcomes.apply(session, orm_run.id, Outcome.finished(
            outputs[orm_run.id], snapshot))

    await engine.committer.grouped(commit)
    with engine.db.read() as s:
        rows = {r.id: (r.status, r.snapshot, r.output, r.updated_at)
                for r in s.scalars(select(Run).where(Run.id.in_(list(outputs))))}
        texts = {o.run_id: o.payload["text"] for o in s.scalars(
            select(OutboxItem).where(OutboxItem.kind == "post_run_result",
                                     OutboxItem.run_id.in_(list(outputs))))}
    assert rows[core_run.id] == rows[orm_run.id]
    assert rows[core_run.id][:3] == ("succeeded", snapshot, outputs[core_run.id])
    assert texts[core_run.id] == texts[orm_run.id] and '"v7"' in texts[core_run.id]


async def test_a_finished_leg_of_a_vanished_run_fails_its_commit(db_url: str) -> None:
    from bot.agents.base import Outcome
    from storage import Run

    engine, _ = await _decided(db_url, 1)
    [(_claim, (run, _request, _inputs))] = await engine.committer.batched(
        partial(engine.resumes.claim_loaded, limit=1))
    ghost = Run(**{c.key: getattr(run, c.key) for c in Run.__table__.columns})
    ghost.id = "no-such-run"
    with pytest.raises(LookupError, match="no-such-run vanished"):
        await engine.committer.grouped(lambda s: engine.outcomes.apply(
            s, ghost.id, Outcome.finished("done", {"x": 1}), known=ghost))
