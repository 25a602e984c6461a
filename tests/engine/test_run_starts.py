"""The run-start inbox: a start is stored before the ack, runs exactly once, is recovered
after a crash, and a start that cannot start tells its starter where they asked
(``bot.engine.run_starts``, ``bot.engine.start_rows``)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from sqlalchemy import func, select, update

from bot.agents.base import Outcome
from bot.engine import Engine, Identity, Origin, Start
from bot.engine.ports import DeliveryError, PostKey
from storage import AuditLog, HumanRequest, RunStart
from storage import Run as RunRow
from tests.engine.helpers import ORIGIN, STARTER, FakeAdapter, FakeDirectory, make_engine
from tests.fakes.sqlite_lock import hold_write_lock


class CountingRuntime:
    """Finishes at once with its prompt; counts (and optionally fails) its runs."""

    name = "form"

    def __init__(self, fail: bool = False, hang: bool = False) -> None:
        self.runs: list[str] = []
        self.fail, self.hang = fail, hang

    async def run(self, prompt: str) -> Outcome:
        self.runs.append(prompt)
        if self.hang:
            await asyncio.sleep(3600)
        if self.fail:
            raise RuntimeError("model unavailable")
        return Outcome.finished(f"done: {prompt}", {"prompt": prompt})

    async def resume(self, snapshot: Any, results: Any) -> Outcome:  # pragma: no cover
        raise AssertionError("not resumed here")


def _engine(db_url: str, **kw: Any) -> tuple[Engine, FakeAdapter, Any, CountingRuntime]:
    runtime = kw.pop("runtime", None) or CountingRuntime()
    engine, adapter, clock = make_engine(db_url, fake=runtime, **kw)
    return engine, adapter, clock, runtime


def _start(prompt: str = "ship it", who: Identity = STARTER, agent: str = "form",
           origin: Origin = ORIGIN) -> Start:
    return Start(agent, prompt, who, origin)


def _rows(engine: Engine) -> list[tuple[str, str | None]]:
    with engine.db.transaction() as s:
        return [(r.state, r.outcome) for r in s.scalars(select(RunStart).order_by(RunStart.id))]


def _count(engine: Engine, model: Any, *where: Any) -> int:
    with engine.db.transaction() as s:
        return int(s.scalar(select(func.count()).select_from(model).where(*where)) or 0)


def _audits(engine: Engine, event: str) -> int:
    return _count(engine, AuditLog, AuditLog.event == event)


async def test_record_then_run_starts_exactly_once(db_url: str) -> None:
    engine, adapter, clock, runtime = _engine(db_url)
    stored = await engine.record_start(_start())
    assert stored is not None
    assert _rows(engine) == [("running", None)]  # stored, born claimed, before the ack
    started = await engine.run_start(stored)
    assert started.run_id == stored.start.run_id and started.words is None
    assert runtime.runs == ["ship it"]
    assert _rows(engine) == [("done", "started")]
    with engine.db.transaction() as s:
        run = s.get(RunRow, stored.start.run_id)
        assert run is not None and run.status == "succeeded"
    await engine.drain()
    assert adapter.results == [(ORIGIN, "done: ship it")]
    # Nothing is left for the worker, even long after the lease.
    clock.advance(3600)
    assert await engine.recover_starts() == 0
    assert runtime.runs == ["ship it"] and _count(engine, RunRow) == 1
    assert _audits(engine, "run_started") == 1


async def test_a_start_left_by_a_crash_is_run_once_by_the_worker(db_url: str) -> None:
    engine, adapter, clock, runtime = _engine(db_url)
    stored = await engine.record_start(_start())
    assert stored is not None  # ...and then the process died: no run_start
    assert await engine.recover_starts() == 0  # still held by the dead process's lease
    clock.advance(engine.tuning.lease.total_seconds() + 1)
    assert await engine.recover_starts() == 1
    assert runtime.runs == ["ship it"]
    assert _rows(engine) == [("done", "started")]
    with engine.db.transaction() as s:
        assert [r.id for r in s.scalars(select(RunRow))] == [stored.start.run_id]
    await engine.drain()
    assert adapter.results == [(ORIGIN, "done: ship it")]
    clock.advance(3600)
    assert await engine.recover_starts() == 0 and runtime.runs == ["ship it"]


async def test_a_crash_during_the_first_leg_reruns_it_without_a_second_run(
    db_url: str,
) -> None:
    runtime = CountingRuntime(hang=True)
    engine, adapter, clock, _ = _engine(db_url, runtime=runtime)
    stored = await engine.record_start(_start())
    assert stored is not None
    live = asyncio.create_task(engine.run_start(stored))
    while not runtime.runs:
        await asyncio.sleep(0.01)
    live.cancel()  # the process died mid-leg: the runs row exists, the outcome does not
    await asyncio.gather(live, return_exceptions=True)
    assert _count(engine, RunRow) == 1 and _rows(engine) == [("running", None)]
    runtime.hang = False
    clock.advance(engine.tuning.lease.total_seconds() + 1)
    assert await engine.recover_starts() == 1
    assert len(runtime.runs) == 2 and _rows(engine) == [("done", "started")]
    assert _count(engine, RunRow) == 1 and _audits(engine, "run_started") == 1
    await engine.drain()
    assert adapter.results == [(ORIGIN, "done: ship it")]


async def test_a_holder_whose_start_was_taken_over_runs_nothing(db_url: str) -> None:
    engine, _, clock, runtime = _engine(db_url)
    stored = await engine.record_start(_start())
    assert stored is not None
    clock.advance(engine.tuning.lease.total_seconds() + 1)  # the holder stalled
    assert await engine.recover_starts() == 1
    late = await engine.run_start(stored)  # the stalled holder wakes up
    assert late.run_id == stored.start.run_id and late.words is None
    assert runtime.runs == ["ship it"] and _rows(engine) == [("done", "started")]


async def test_a_refused_starter_is_told_by_the_caller_and_nothing_runs(db_url: str) -> None:
    engine, adapter, _, runtime = _engine(db_url)
    stranger = Identity("slack", "U_NOBODY")
    stored = await engine.record_start(_start(who=stranger))
    assert stored is not None
    started = await engine.run_start(stored)
    assert started.run_id is None and started.words is not None
    assert "not allowed to start 'form'" in str(started.words)
    assert runtime.runs == [] and _count(engine, RunRow) == 0
    assert _rows(engine) == [("failed", "refused")]
    assert _audits(engine, "run_start_failed") == 1
    await engine.drain()
    assert adapter.results == []  # the caller shows the words


async def test_a_recovered_start_whose_agent_was_removed_tells_the_starter(
    db_url: str,
) -> None:
    engine, adapter, clock, runtime = _engine(db_url)
    stored = await engine.record_start(_start())
    assert stored is not None
    settings = engine.settings
    engine.settings = settings.model_copy(update={"agents": {
        k: v for k, v in settings.agents.items() if k != "form"}})
    clock.advance(engine.tuning.lease.total_seconds() + 1)
    assert await engine.recover_starts() == 1
    await engine.drain()
    assert runtime.runs == [] and _count(engine, RunRow) == 0
    assert [origin for origin, _ in adapter.results] == [ORIGIN]  # where they asked
    assert "Unknown agent 'form'" in adapter.results[0][1]
    assert _rows(engine)[0][0] == "failed"
    with engine.db.transaction() as s:
        audit = s.scalars(select(AuditLog).where(AuditLog.event == "run_start_failed")).one()
        assert audit.actor_user == STARTER.user_id and audit.details["run_id"] == \
            stored.start.run_id


async def test_a_start_that_keeps_crashing_is_given_up_and_told(db_url: str) -> None:
    engine, adapter, clock, runtime = _engine(db_url)
    stored = await engine.record_start(_start())
    assert stored is not None
    with engine.db.transaction() as s:  # every earlier holder died mid-leg
        s.execute(update(RunStart).values(attempts=engine.tuning.max_attempts))
    clock.advance(engine.tuning.lease.total_seconds() + 1)
    assert await engine.recover_starts() == 1
    await engine.drain()
    assert runtime.runs == []
    assert _rows(engine) == [("failed", "gave_up")]
    assert adapter.results == [(ORIGIN, "Your run of 'form' was received, but askhuman "
                                "could not start it after several attempts; nothing ran. "
                                "Please try again.")]


async def test_a_failing_first_leg_fails_the_run_once_and_says_so(db_url: str) -> None:
    engine, adapter, clock, runtime = _engine(db_url, runtime=CountingRuntime(fail=True))
    stored = await engine.record_start(_start())
    assert stored is not None
    assert (await engine.run_start(stored)).run_id == stored.start.run_id
    assert _rows(engine) == [("done", "failed")]
    with engine.db.transaction() as s:
        assert s.get(RunRow, stored.start.run_id).status == "failed"  # type: ignore[union-attr]
    await engine.drain()
    assert adapter.results == [(ORIGIN, "The run failed: model unavailable")]
    clock.advance(3600)
    assert await engine.recover_starts() == 0 and len(runtime.runs) == 1


async def test_the_scripted_agent_asks_from_a_stored_start(db_url: str) -> None:
    engine, adapter, _, _ = _engine(db_url)
    stored = await engine.record_start(_start(agent="deploy"))
    assert stored is not None
    await engine.run_start(stored)
    await engine.drain()
    assert _count(engine, HumanRequest) == 1 and len(adapter.delivered) == 1
    assert _rows(engine) == [("done", "started")]


class ThreadOpener(FakeAdapter):
    """A fake adapter whose runs need a thread it opens (like a Slack slash command)."""

    def __init__(self, refuse: bool = False) -> None:
        super().__init__()
        self.opened: list[PostKey] = []
        self.refuse = refuse

    async def open_thread(self, origin: Origin, starter: Identity, agent: str, prompt: str,
                          key: PostKey) -> Origin:
        self.opened.append(key)
        if self.refuse:
            raise DeliveryError("not_in_channel", reason="askhuman isn't in that channel.")
        return Origin(origin.platform, origin.channel, f"root-{len(self.opened)}")


async def test_a_run_without_a_thread_gets_one_once_even_across_a_crash(db_url: str) -> None:
    engine, _, clock, runtime = _engine(db_url)
    opener = ThreadOpener()
    engine.register_adapter(opener, FakeDirectory())
    bare = Origin("slack", "C_ORIGIN")
    stored = await engine.record_start(_start(origin=bare))
    assert stored is not None
    clock.advance(engine.tuning.lease.total_seconds() + 1)
    assert await engine.recover_starts() == 1
    await engine.drain()
    assert [(k.id, k.attempt, k.retry) for k in opener.opened] == [
        (f"start:{stored.start.run_id}", 2, True)]  # a retry: look for an earlier post
    assert opener.results == [(Origin("slack", "C_ORIGIN", "root-1"), "done: ship it")]
    with engine.db.transaction() as s:
        assert s.get(RunRow, stored.start.run_id).origin_thread == "root-1"  # type: ignore[union-attr]
    assert runtime.runs == ["ship it"]


async def test_no_thread_to_report_into_means_no_run_and_the_caller_says_why(
    db_url: str,
) -> None:
    engine, _, _, runtime = _engine(db_url)
    engine.register_adapter(ThreadOpener(refuse=True), FakeDirectory())
    stored = await engine.record_start(_start(origin=Origin("slack", "C_ELSEWHERE")))
    assert stored is not None
    started = await engine.run_start(stored)
    assert started.run_id is None
    assert str(started.words) == ("I could not post the run's first message here (askhuman "
                                  "isn't in that channel.), so the run had nowhere to "
                                  "report; nothing ran.")
    assert runtime.runs == [] and _rows(engine) == [("failed", "unavailable")]


async def test_a_start_the_database_cannot_store_in_time_is_never_run(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    engine, _, clock, runtime = _engine(f"sqlite:///{path}")
    held = threading.Event()
    locker = threading.Thread(target=hold_write_lock, args=(path, 1.5, held))
    locker.start()
    held.wait(5)
    began = time.monotonic()
    stored = await engine.record_start(_start(), budget=0.5)
    assert stored is None and time.monotonic() - began < 1.0  # said so within the budget
    await asyncio.to_thread(locker.join)
    await engine.drain()
    await asyncio.sleep(0.2)
    await engine.drain()
    clock.advance(3600)
    assert await engine.recover_starts() == 0
    assert runtime.runs == [] and all(state == "failed" for state, _ in _rows(engine))
