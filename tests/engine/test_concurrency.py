"""Races: many people clicking at once, and workers dying mid-resume (real processes)."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from bot.engine import Identity
from storage import AuditLog, HumanRequest, ResumeJob, Run, Vote
from tests.engine.helpers import ORIGIN, STARTER, alice, kill_when, make_engine
from tests.engine.proc_helper import CROWD_ROUTE, LEASE_SECONDS

ROOT = Path(__file__).resolve().parents[2]


def _child(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.engine.proc_helper", *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _count(engine: Any, model: Any, *where: Any) -> int:
    with engine.db.transaction() as s:
        return int(s.scalar(select(func.count()).select_from(model).where(*where)) or 0)


async def _crowd_request(db_url: str) -> tuple[Any, str]:
    engine, adapter, _ = make_engine(db_url, route=CROWD_ROUTE)
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    return engine, adapter.delivered[0][0].ref


async def test_fifty_concurrent_answers_one_decision(db_url: str) -> None:
    engine, ref = await _crowd_request(db_url)
    people = [Identity("slack", f"U{i}", f"User {i}") for i in range(50)]
    results = await asyncio.gather(*(
        engine.respond(ref, p, "approve", {"environment": "staging"}) for p in people))
    outcomes = collections.Counter(r.outcome for r in results)
    assert outcomes == {"accepted": 1, "already_decided": 49}
    winner = next(r for r in results if r.outcome == "accepted")
    assert winner.card is not None
    loser = next(r for r in results if r.outcome == "already_decided")
    assert loser.message.startswith(f"Already decided by {winner.card.decided_by_name}")
    assert _count(engine, Vote) == 1
    assert _count(engine, ResumeJob) == 1
    assert _count(engine, AuditLog, AuditLog.event == "decided") == 1


@pytest.mark.postgres
async def test_two_processes_answer_at_once_on_postgres(postgres_url: str) -> None:
    engine, ref = await _crowd_request(postgres_url)
    children = [_child("respond", postgres_url, ref, str(first), "25") for first in (0, 25)]
    total: collections.Counter[str] = collections.Counter()
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        total.update(json.loads(out.strip().splitlines()[-1]))
    assert total == {"accepted": 1, "already_decided": 49}
    assert _count(engine, ResumeJob) == 1 and _count(engine, Vote) == 1



async def test_worker_killed_mid_resume_resumes_exactly_once(
    db_url: str, tmp_path: Path
) -> None:
    engine, adapter, clock = make_engine(db_url, lease_seconds=LEASE_SECONDS)
    run_id = await engine.start_run("deploy", "Deploy v7.0.0", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    assert (await engine.respond(ref, alice(), "approve", {"environment": "production"})).ok
    marker = tmp_path / "resuming"
    kill_when(_child("crash-resume", db_url, str(marker)), marker)

    assert await engine.job_states() == {"running": 1}
    assert await engine.run_worker_once() == 0  # the dead worker's lease still holds
    clock.advance(LEASE_SECONDS + 1)
    assert await engine.run_worker_once() == 1
    clock.advance(3600)
    assert await engine.run_worker_once() == 0
    assert adapter.results == [(ORIGIN, "Deployed v7.0.0 to production. Health checks are green.")]
    assert _count(engine, AuditLog, AuditLog.event == "resumed") == 1
    assert await engine.job_states() == {"done": 1}
    with engine.db.transaction() as s:
        run = s.get(Run, run_id)
        assert run is not None and run.status == "succeeded"
        assert s.scalars(select(HumanRequest)).one().status == "submitted"


async def test_killed_after_resume_commit_does_not_resume_again(
    db_url: str, tmp_path: Path
) -> None:
    engine, adapter, clock = make_engine(db_url, lease_seconds=LEASE_SECONDS)
    await engine.start_run("deploy", "Deploy v8.0.0", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    await engine.respond(ref, alice(), "reject", {"environment": "staging"})
    marker = tmp_path / "posting"
    kill_when(_child("crash-post", db_url, str(marker)), marker)
    assert "rejected" in marker.read_text()

    clock.advance(LEASE_SECONDS + 3600)
    assert await engine.run_worker_once() == 0
    assert _count(engine, AuditLog, AuditLog.event == "resumed") == 1
    assert await engine.job_states() == {"done": 1}
