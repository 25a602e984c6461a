"""A worker process killed around an approved tool call (real processes, SIGKILL).

- Killed after the approval but before the tool ran: the resume is retried once its
  lease expires, and the tool runs exactly once.
- Killed in the middle of the tool call: the retried resume runs the call again. The
  side effect is at-least-once (docs/tools.md), and the audit shows it: two "tool_started"
  rows and one "tool_finished".
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from bot.engine import Engine, Identity
from storage import AuditLog, Run
from tests.engine.helpers import ORIGIN, STARTER, FakeAdapter, FakeClock, kill_when
from tests.tools.proc_worker import LEASE_SECONDS, tool_engine

ROOT = Path(__file__).resolve().parents[2]
ALICE = Identity("slack", "U_ALICE", "Alice")


def _kill_child_at(mode: str, db_url: str, marker: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-m", "tests.tools.proc_worker", mode, db_url,
                              str(marker)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    kill_when(child, marker)


def _events(db_url: str, engine: Engine) -> list[str]:
    with engine.db.transaction() as session:
        return [a.event for a in session.scalars(select(AuditLog).order_by(AuditLog.id))]


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "journal.txt"
    monkeypatch.setenv("TOOLS_JOURNAL", str(path))
    monkeypatch.delenv("TOOLS_HANG", raising=False)
    return path


async def _approved(db_url: str, marker: Path) -> tuple[Engine, FakeAdapter, FakeClock]:
    engine, adapter, clock = tool_engine(db_url, str(marker))
    await engine.start_run("ops", "write it", STARTER, ORIGIN)
    (card, _target), = adapter.delivered
    assert card.tool is not None and card.tool.tool == "slow_write"
    assert (await engine.respond(card.ref, ALICE, "approve", {})).ok
    return engine, adapter, clock


async def test_killed_between_approval_and_execution_runs_exactly_once(
    db_url: str, tmp_path: Path, journal: Path
) -> None:
    marker = tmp_path / "marker"
    engine, adapter, clock = await _approved(db_url, marker)
    _kill_child_at("before-tools", db_url, marker)
    assert not journal.exists()  # the dead worker ran nothing
    assert await engine.job_states() == {"running": 1}
    assert await engine.run_worker_once() == 0
    clock.advance(LEASE_SECONDS + 1)
    assert await engine.run_worker_once() == 1
    clock.advance(3600)
    assert await engine.run_worker_once() == 0
    assert journal.read_text().splitlines() == ["slow_write marker"]
    trail = _events(db_url, engine)
    assert trail.count("tool_started") == 1 and trail.count("tool_finished") == 1
    assert trail.count("resumed") == 1
    line, final = [text for _origin, text in adapter.results]
    assert line.startswith("Ran slow_write(marker=") and line.endswith("): ok")
    assert final == "slow_write success: written"


async def test_killed_mid_tool_call_runs_again_and_the_audit_shows_it(
    db_url: str, tmp_path: Path, journal: Path
) -> None:
    marker = tmp_path / "marker"
    engine, _adapter, clock = await _approved(db_url, marker)
    _kill_child_at("mid-tool", db_url, marker)
    assert journal.read_text().splitlines() == ["slow_write marker"]  # the side effect happened
    trail = _events(db_url, engine)
    assert trail.count("tool_started") == 1 and trail.count("tool_finished") == 0
    clock.advance(LEASE_SECONDS + 1)
    assert await engine.run_worker_once() == 1
    # At-least-once: the retried resume ran the call a second time...
    assert journal.read_text().splitlines() == ["slow_write marker", "slow_write marker"]
    # ...and an admin sees it: a "tool_started" with no "tool_finished" before the retry.
    trail = _events(db_url, engine)
    assert trail.count("tool_started") == 2 and trail.count("tool_finished") == 1
    first_start = trail.index("tool_started")
    assert trail[first_start + 1] != "tool_finished"
    with engine.db.transaction() as session:
        run = session.scalars(select(Run)).one()
        assert run.status == "succeeded"
