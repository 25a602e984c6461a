"""Processes sharing a SQLite file hear each other's commits (``sqlite_watch``).

SQLite has no LISTEN/NOTIFY. Before the watch, an ``askhuman worker`` beside ``serve
--no-background`` found the web process's resumes at its next poll (2 s), and a
long-poll heard another process's decision only at its one-second recheck. Two engines
on one file stand in for two processes: each has its own loops and waiters, as a
process would. The polls and rechecks are set far beyond the tests' deadlines, so only
the watch can make them pass."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import pytest

from bot.commands.roles import Role
from bot.commands.serve_cmd import build_app, share_sqlite
from bot.engine.runtimes import Runtimes
from bot.engine.sqlite_watch import QUIET_AFTER, SLOW_DOWN, DataVersion, pause
from tests.engine.batch_rows import api_client, ask_tool
from tests.engine.helpers import ORIGIN, STARTER, alice, make_engine
from tests.engine.test_click_inbox import _engine
from tests.fakes.asgi_server import serve_in_loop

WATCH = 0.02


async def test_a_worker_resumes_a_web_processes_decision_without_waiting_for_its_poll(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    web, web_adapter, _ = make_engine(url)  # runs no loops: its decisions claim nothing
    worker, worker_adapter, _ = make_engine(url)
    worker.tuning.watch_interval, worker.tuning.watch_resumes = WATCH, True
    await web.start_run("deploy", "Deploy v9.1", STARTER, ORIGIN)
    card, _ = web_adapter.delivered[0]
    stop = asyncio.Event()
    loops = asyncio.create_task(worker.serve_forever(stop, poll_interval=600.0))
    try:
        await asyncio.sleep(0.2)  # the worker's first rounds found nothing
        answer = await web.respond(card.ref, alice(), "approve", {"environment": "staging"})
        assert answer.outcome == "accepted", answer.message
        async with asyncio.timeout(10):  # its poll would come in 600 s
            while not worker_adapter.results:
                await asyncio.sleep(0.01)
        assert "Deployed" in worker_adapter.results[0][1]
        assert await worker.job_states() == {"done": 1}
        assert not web_adapter.results  # resumed once, by the worker
    finally:
        stop.set()
        await loops
        web.db.dispose()
        worker.db.dispose()


async def test_another_processes_commits_wake_the_resume_loop_only_for_a_resume(
    tmp_path: Path,
) -> None:
    """Every commit moves the file's version, this process's own too; the resume loop
    is woken (a claim transaction) only when a resume job is queued and due."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    web, web_adapter, _ = make_engine(url)
    worker, _, _ = make_engine(url)
    worker.tuning.watch_interval, worker.tuning.watch_resumes = WATCH, True
    stop = asyncio.Event()
    loops = asyncio.create_task(worker.serve_forever(stop, poll_interval=600.0))
    try:
        await asyncio.sleep(0.2)
        pokes = worker.wakeups.pokes
        for i in range(3):  # a run started, its card delivered: no resume to run
            await web.start_run("deploy", f"Deploy v9.{i}", STARTER, ORIGIN)
            await asyncio.sleep(0.1)
        assert worker.wakeups.pokes == pokes
        card, _ = web_adapter.delivered[0]
        await web.respond(card.ref, alice(), "approve", {"environment": "staging"})
        async with asyncio.timeout(10):
            while await worker.job_states() != {"done": 1}:
                await asyncio.sleep(0.01)
        assert worker.wakeups.pokes > pokes
    finally:
        stop.set()
        await loops
        web.db.dispose()
        worker.db.dispose()


async def test_a_long_poll_hears_another_processes_decision_at_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    waiting, _, _ = _engine(url)
    deciding, _, _ = _engine(url)
    waiting.tuning.watch_interval = WATCH  # and no recheck: only the watch can wake it
    client = api_client(waiting, ["ops"])
    refs = [await ask_tool(waiting, client, "ops", "deploy") for _ in range(3)]
    stop = asyncio.Event()
    ear = asyncio.create_task(waiting.hear_others(stop))
    polls = [asyncio.ensure_future(waiting.wait_external(client.id, ref, 600))
             for ref in refs]
    try:
        await asyncio.sleep(0.1)  # registered and waiting
        result = await deciding.cancel_external(client, refs[1], "wrong release")
        assert result.outcome == "accepted", result
        async with asyncio.timeout(10):  # the poll's own end is 600 s away
            view = await polls[1]
        assert view is not None and view.status == "cancelled"
        await asyncio.sleep(0.2)  # several watches later, the others still wait
        assert not polls[0].done() and not polls[2].done()
    finally:
        for poll in polls:
            poll.cancel()
        stop.set()
        await ear
        waiting.db.dispose()
        deciding.db.dispose()


def test_the_data_version_moves_on_another_connections_commit_only(tmp_path: Path) -> None:
    path = str(tmp_path / "v.db")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("PRAGMA journal_mode=wal")
    other.execute("CREATE TABLE t (x INTEGER)")
    version = DataVersion(path)
    try:
        assert not version.moved()
        other.execute("INSERT INTO t VALUES (1)")
        assert version.moved()
        assert not version.moved()  # nothing new since
        other.execute("BEGIN")
        other.execute("INSERT INTO t VALUES (2)")
        assert not version.moved()  # not committed yet
        other.execute("COMMIT")
        assert version.moved()
    finally:
        version.close()
        other.close()


def test_the_watch_slows_down_when_quiet_or_unwanted() -> None:
    assert pause(0.025, 0.2, wanted=True) == 0.025
    assert pause(0.025, QUIET_AFTER + 0.1, wanted=True) == 0.025 * SLOW_DOWN
    assert pause(0.025, 0.2, wanted=False) == 0.025 * SLOW_DOWN


async def test_warming_builds_every_agent_and_logs_one_that_cannot_be(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def factory(name: str) -> object:
        if name == "broken":
            raise ValueError("model 'nope:x' is not known")
        return object()

    runtimes = Runtimes(factory, from_registry=False)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="askhuman.engine"):
        await runtimes.warm(["deploy", "broken", "form"])
    assert sorted(runtimes.built) == ["deploy", "form"]
    assert any(getattr(r, "agent", None) == "broken" and "nope:x" in getattr(r, "error", "")
               for r in caplog.records)


@pytest.mark.parametrize(("processes", "role", "shared"), [
    (1, Role.ALL, False), (2, Role.ALL, True), (1, Role.WEB, True), (1, Role.WORKER, True)])
def test_serve_watches_a_sqlite_file_only_when_processes_share_it(
    tmp_path: Path, processes: int, role: Role, shared: bool,
) -> None:
    """Only ``askhuman worker`` looks for others' resumes: every other role takes
    events in and runs (or leaves to a worker) its own decisions' resumes."""
    engine, _, _ = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    share_sqlite(engine, processes, role)
    assert (engine.tuning.watch_interval is not None) is shared
    assert (engine.tuning.wait_recheck is not None) is shared
    assert engine.tuning.watch_resumes is (role is Role.WORKER)
    engine.db.dispose()


async def test_a_worker_builds_its_agents_when_it_starts(tmp_path: Path) -> None:
    """``askhuman worker`` exists to resume: its first resume must not wait for the
    agent stack's import (~1 s), so the worker role builds the agents at start."""
    engine, _, _ = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    async with serve_in_loop(build_app(engine, [], role=Role.WORKER)):
        async with asyncio.timeout(30):
            while "deploy" not in engine.runtimes.built:  # (no scripted "form" to build)
                await asyncio.sleep(0.02)
    engine.db.dispose()
