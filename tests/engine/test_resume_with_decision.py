"""A decision that finds a resume slot free claims its resume in its own transaction.

On an idle server the resume then starts as soon as the decision commits: no claim
transaction of its own, no wake-up of the resume loop. With no slot free the job is
left queued for the loop, as before; a process that runs no resumes never claims; a
decision that rolls back gives its slot back; and a resume claimed this way whose
process dies is run again, once, when its lease runs out.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.orm import Session

from bot.agents.base import Outcome
from bot.engine import Engine
from bot.settings import WorkerSettings
from storage import AuditLog, ResumeJob
from tests.engine.helpers import ORIGIN, STARTER, alice, kill_when, make_engine
from tests.engine.proc_helper import LEASE_SECONDS

ANSWER = {"environment": "staging"}
ROOT = Path(__file__).resolve().parents[2]


class Spy:
    """Which transaction each decision and each resume claim ran in (by the session's
    transaction: a thread's kept session serves many transactions)."""

    def __init__(self, engine: Engine) -> None:
        self.decided: dict[str, Any] = {}
        self.claims: list[tuple[Any, list[int]]] = []
        decide, claim = engine.decider.decide, engine.resumes.claim_loaded
        claim_in = engine.resumes.claim_in

        def spy_decide(session: Session, ref: str, *args: Any, **kwargs: Any) -> Any:
            self.decided[ref] = session.get_transaction()
            return decide(session, ref, *args, **kwargs)

        def spy_claim(session: Session, limit: int) -> Any:
            claimed = claim(session, limit)
            self.claims.append((session.get_transaction(),
                                [c.request_id for c, _ in claimed]))
            return claimed

        def spy_claim_in(session: Session, slot: Any) -> None:  # the job born claimed
            claim_in(session, slot)
            self.claims.append((session.get_transaction(),
                                [c.request_id for c, _ in slot.claimed]))

        engine.decider.decide = spy_decide  # type: ignore[method-assign]
        engine.resumes.claim_loaded = spy_claim  # type: ignore[method-assign]
        engine.resumes.claim_in = spy_claim_in  # type: ignore[method-assign]

    def claimed_in(self, ref: str) -> list[int]:
        """The jobs (request ids) claimed in ``ref``'s decision transaction."""
        return [i for txn, ids in self.claims if txn is self.decided[ref] for i in ids]


class Gated:
    """The scripted agent, whose resumes wait for ``go`` once ``started`` is set."""

    name = "deploy"

    def __init__(self, real: Any) -> None:
        self._real = real
        self.started, self.go = asyncio.Event(), asyncio.Event()

    async def run(self, prompt: str, **kwargs: Any) -> Outcome:
        return await self._real.run(prompt, **kwargs)  # type: ignore[no-any-return]

    async def resume(self, snapshot: dict[str, Any], results: dict[str, Any],
                     **kwargs: Any) -> Outcome:
        self.started.set()
        await self.go.wait()
        return await self._real.resume(snapshot, results, **kwargs)  # type: ignore[no-any-return]


@asynccontextmanager
async def serving(engine: Engine) -> AsyncIterator[None]:
    """The engine's loops (a 60 s poll: only wake-ups and decisions start resumes)."""
    stop = asyncio.Event()
    worker = asyncio.create_task(engine.serve_forever(stop, poll_interval=60.0))
    await asyncio.sleep(0.3)  # the first rounds ran and found nothing
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(worker, 20)


async def until(check: Callable[[], bool], timeout: float = 20.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out")


def resumed(engine: Engine) -> int:
    with engine.db.read() as s:
        return int(s.scalar(select(func.count()).select_from(AuditLog)
                            .where(AuditLog.event == "resumed")) or 0)


async def test_a_free_slot_claims_the_resume_in_the_decision_and_wakes_no_loop(
        db_url: str) -> None:
    engine, adapter, _ = make_engine(db_url)
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    async with serving(engine):
        spy, pokes = Spy(engine), engine.wakeups.pokes
        assert (await engine.respond(ref, alice(), "approve", ANSWER)).outcome == "accepted"
        await until(lambda: len(adapter.results) == 1)
        assert len(spy.claimed_in(ref)) == 1  # claimed in the decision's transaction
        assert [ids for _, ids in spy.claims] in ([[1]], [[1], []])  # the loop: nothing
        if not engine.db.is_postgres:  # (there our own NOTIFY comes back and wakes it)
            assert len(spy.claims) == 1 and engine.wakeups.pokes == pokes  # nor woken
    assert resumed(engine) == 1 and await engine.job_states() == {"done": 1}
    assert "Deployed" in adapter.results[0][1]


async def test_with_no_free_slot_the_job_is_left_to_the_loop(db_url: str) -> None:
    engine, adapter, _ = make_engine(db_url)
    engine.settings = engine.settings.model_copy(
        update={"worker": WorkerSettings(resume_concurrency=1)})
    gated = engine.runtimes.built["deploy"] = Gated(engine.runtimes.get("deploy"))
    for i in range(2):
        await engine.start_run("deploy", f"Deploy v{i}", STARTER, ORIGIN)
    first, second = (card.ref for card, _ in adapter.delivered)
    async with serving(engine):
        spy = Spy(engine)
        assert (await engine.respond(first, alice(), "approve", ANSWER)).outcome == "accepted"
        await asyncio.wait_for(gated.started.wait(), 20)  # the one slot is busy
        assert len(spy.claimed_in(first)) == 1
        with engine.db.read() as s:  # born claimed: held by us, as a claim would be
            job = s.scalars(select(ResumeJob).where(ResumeJob.state == "running")).one()
        assert (job.attempts, job.holder) == (1, engine.ctx.instance_id)
        assert job.claim_token and job.lease_until is not None
        assert (await engine.respond(second, alice(), "approve", ANSWER)).outcome == "accepted"
        assert spy.claimed_in(second) == []  # no slot: nothing claimed by the decision
        assert await engine.job_states() == {"running": 1, "queued": 1}
        gated.go.set()  # the first resume ends, its slot frees, the loop takes the second
        await until(lambda: len(adapter.results) == 2)
        later = [ids for session, ids in spy.claims
                 if session not in spy.decided.values() and ids]
        assert len(later) == 1 and len(later[0]) == 1
    assert resumed(engine) == 2 and await engine.job_states() == {"done": 2}


async def test_a_process_that_runs_no_resumes_never_claims_them(db_url: str) -> None:
    """Without ``serve_forever``'s loops (``serve --no-background``) the job is queued."""
    engine, adapter, _ = make_engine(db_url)
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    spy = Spy(engine)
    assert (await engine.respond(ref, alice(), "approve", ANSWER)).outcome == "accepted"
    assert spy.claims == [] and await engine.job_states() == {"queued": 1}
    assert await engine.run_worker_once() == 1 and resumed(engine) == 1


async def test_a_decision_that_rolls_back_gives_its_slot_back(db_url: str) -> None:
    engine, adapter, _ = make_engine(db_url)
    engine.settings = engine.settings.model_copy(
        update={"worker": WorkerSettings(resume_concurrency=1)})
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    async with serving(engine):
        spy = Spy(engine)
        decide = engine.decider.decide

        def fail_once(session: Session, *args: Any, **kwargs: Any) -> Any:
            engine.decider.decide = decide  # type: ignore[method-assign]
            decide(session, *args, **kwargs)
            raise RuntimeError("the decision's transaction fails")

        engine.decider.decide = fail_once  # type: ignore[method-assign]
        with pytest.raises(RuntimeError):
            await engine.respond(ref, alice(), "approve", ANSWER)
        assert await engine.job_states() == {}  # rolled back: no job, no claim
        assert (await engine.respond(ref, alice(), "approve", ANSWER)).outcome == "accepted"
        assert len(spy.claimed_in(ref)) == 1  # the one slot was free again
        await until(lambda: len(adapter.results) == 1)
    assert resumed(engine) == 1


async def test_killed_during_a_resume_its_decision_claimed_it_runs_again_once(
        db_url: str, tmp_path: Path) -> None:
    engine, adapter, clock = make_engine(db_url, lease_seconds=LEASE_SECONDS)
    await engine.start_run("deploy", "Deploy v7.0.0", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    marker = tmp_path / "resuming"
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.engine.proc_helper", "crash-decided", db_url, ref,
         str(marker)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    kill_when(child, marker)  # its resume loop claims nothing: the decision claimed it

    with engine.db.read() as s:
        job = s.scalars(select(ResumeJob)).one()
        assert (job.state, job.attempts) == ("running", 1)
    assert await engine.run_worker_once() == 0  # the dead process's lease still holds
    clock.advance(LEASE_SECONDS + 1)
    assert await engine.run_worker_once() == 1
    clock.advance(3600)
    assert await engine.run_worker_once() == 0
    assert adapter.results == [(ORIGIN, "Deployed v7.0.0 to production. Health checks are green.")]
    assert resumed(engine) == 1 and await engine.job_states() == {"done": 1}


async def test_a_runtime_is_first_built_off_the_event_loop() -> None:
    """Building an agent's runtime imports the agent stack (seconds on a busy machine):
    on the event loop it would stall the process's heartbeat too (presumed dead)."""
    import threading

    from bot.engine.runtimes import Runtimes

    built_on: list[threading.Thread] = []

    def factory(name: str) -> Any:
        built_on.append(threading.current_thread())
        return object()

    runtimes = Runtimes(factory, from_registry=False)
    first = await runtimes.ready("deploy")
    assert await runtimes.ready("deploy") is first and runtimes.get("deploy") is first
    assert built_on and built_on[0] is not threading.main_thread() and len(built_on) == 1


async def test_a_one_vote_decision_is_written_without_reading_votes_or_a_claim_update(
        db_url: str) -> None:
    """Inside the write lock, a decision that needs one vote (quorum 1, frozen) neither
    reads the request's earlier votes (there can be none) nor claims its resume with an
    UPDATE: the job is inserted already running (born claimed)."""
    engine, adapter, _ = make_engine(db_url)
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    sent: list[str] = []  # the statements of the decision's transaction only
    inside = threading.local()
    decide = engine.decider._decide_claiming

    def deciding(*args: Any) -> Any:
        inside.on = True
        try:
            return decide(*args)
        finally:
            inside.on = False

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if getattr(inside, "on", False):
            sent.append(" ".join(statement.split()))

    engine.decider._decide_claiming = deciding  # type: ignore[method-assign]
    async with serving(engine):
        event.listen(engine.db.engine, "before_cursor_execute", record)
        try:
            assert (await engine.respond(ref, alice(), "approve", ANSWER)).outcome == "accepted"
        finally:
            event.remove(engine.db.engine, "before_cursor_execute", record)
        await until(lambda: len(adapter.results) == 1)
    assert [s for s in sent if s.startswith("SELECT responses.")] == [], sent
    assert [s for s in sent if s.startswith("INSERT INTO responses")], sent
    assert [s for s in sent if s.startswith("INSERT INTO resume_jobs")], sent
    claims = [s for s in sent if s.startswith("WITH picked") or (
        s.startswith("UPDATE resume_jobs") and "attempts=(resume_jobs.attempts" in s)]
    assert claims == [], sent
    assert resumed(engine) == 1 and await engine.job_states() == {"done": 1}
