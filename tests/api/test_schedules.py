"""Schedules fire once across replicas and catch up after downtime; stuck triggers restart."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

from pydantic import JsonValue
from sqlalchemy import select

from bot.agents.base import Outcome
from bot.askhuman.schema import AskHumanToolResult
from bot.engine.core import Engine
from bot.settings import Settings
from storage import Database, Run, RunTrigger

START = dt.datetime(2030, 1, 1, 0, 1, tzinfo=dt.UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> dt.datetime:
        return self.now


class Finishes:
    """A runtime that answers at once (the schedule, not the agent, is under test)."""

    name = "stub"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def run(self, prompt: str) -> Outcome:
        self.prompts.append(prompt)
        return Outcome.finished(f"did: {prompt}", {})

    async def resume(self, snapshot: dict[str, JsonValue],
                     results: dict[str, AskHumanToolResult]) -> Outcome:
        raise AssertionError("never asks")


def settings_for(db_url: str, **schedule: Any) -> Settings:
    nightly = {"cron": "*/5 * * * *", "agent": "deploy", "prompt": "rotate the logs"}
    nightly.update(schedule)
    return Settings.model_validate({
        "database_url": db_url,
        "agents": {"deploy": {"model": "scripted:deploy", "route": "ops"}},
        "routes": {"ops": {"console": {}}},
        "schedules": {"logs": nightly},
    })


def replicas(db_url: str, count: int = 2, **schedule: Any) -> tuple[list[Engine], Clock,
                                                                      Finishes]:
    settings = settings_for(db_url, **schedule)
    Database(db_url).upgrade()
    clock, runtime = Clock(), Finishes()
    engines = [Engine(Database(db_url), settings, runtimes=lambda _name: runtime, clock=clock)
               for _ in range(count)]
    return engines, clock, runtime


async def fire_all(engines: list[Engine]) -> list[int]:
    fired = await asyncio.gather(*(engine.fire_due_schedules() for engine in engines))
    for engine in engines:
        await engine.drain()
    return list(fired)


def triggers(engine: Engine) -> list[tuple[str | None, dt.datetime | None]]:
    with engine.db.read() as session:
        rows = session.scalars(select(RunTrigger).order_by(RunTrigger.fire_at))
        return [(row.schedule, row.fire_at) for row in rows]


def runs(engine: Engine) -> list[tuple[str, str]]:
    with engine.db.read() as session:
        return [(run.status, run.started_by_platform) for run in session.scalars(select(Run))]


async def test_a_schedule_fires_once_across_replicas_and_catches_up(db_url: str) -> None:
    engines, clock, runtime = replicas(db_url)
    try:
        assert await fire_all(engines) == [0, 0]  # first sweep: the baseline, nothing due
        clock.now = START + dt.timedelta(minutes=4, seconds=30)  # 00:05:30
        assert sorted(await fire_all(engines)) == [0, 1]
        assert sorted(await fire_all(engines)) == [0, 0]  # the same time never fires twice
        # Both replicas were down for an hour: one catch-up run for the latest time.
        clock.now = START + dt.timedelta(hours=1, minutes=6)  # 01:07
        assert sorted(await fire_all(engines)) == [0, 1]
        assert triggers(engines[0]) == [("logs", dt.datetime(2030, 1, 1, 0, 5)),
                                        ("logs", dt.datetime(2030, 1, 1, 1, 5))]
        assert runs(engines[0]) == [("succeeded", "schedule")] * 2
        assert runtime.prompts == ["rotate the logs"] * 2
    finally:
        for engine in engines:
            engine.db.dispose()


async def test_without_catch_up_missed_times_are_skipped(db_url: str) -> None:
    [engine], clock, runtime = replicas(db_url, count=1, catch_up=False)
    try:
        await fire_all([engine])
        clock.now = START + dt.timedelta(hours=2)  # 02:01: 02:00 is only 1 min late
        assert await fire_all([engine]) == [1]
        clock.now = START + dt.timedelta(hours=5, minutes=3)  # 05:04: 05:00 is 4 min late
        assert await fire_all([engine]) == [0]
        assert len(runtime.prompts) == 1
    finally:
        engine.db.dispose()


async def test_a_trigger_whose_process_died_is_restarted_once(db_url: str) -> None:
    engines, clock, runtime = replicas(db_url)
    now = clock.now.replace(tzinfo=None)
    try:
        with engines[0].db.transaction() as session:  # claimed, then the process died
            session.add(RunTrigger(id="dead0001", source="schedule", schedule="logs",
                                   fire_at=now, agent="deploy", prompt="orphan",
                                   origin_platform="console", origin_channel=None,
                                   state="claimed", lease_until=now, created_at=now,
                                   updated_at=now))
        assert await asyncio.gather(*(e.reclaim_triggers() for e in engines)) == [0, 0]
        clock.now += dt.timedelta(minutes=1)  # the lease ran out
        restarted = await asyncio.gather(*(e.reclaim_triggers() for e in engines))
        for engine in engines:
            await engine.drain()
        assert sorted(restarted) == [0, 1] and runtime.prompts == ["orphan"]
        with engines[0].db.read() as session:
            trigger = session.get(RunTrigger, "dead0001")
            assert trigger is not None and trigger.state == "started"
            assert session.get(Run, "dead0001") is not None
        clock.now += dt.timedelta(minutes=10)
        assert await asyncio.gather(*(e.reclaim_triggers() for e in engines)) == [0, 0]
    finally:
        for engine in engines:
            engine.db.dispose()


def test_schedule_config_errors_name_the_key(tmp_path: Any) -> None:
    from bot.settings import ConfigError, load_file

    path = tmp_path / "c.yaml"
    path.write_text("agents: {a: {model: 'scripted:deploy', route: r}}\n"
                    "routes: {r: {console: {}}}\n"
                    "schedules: {s: {cron: 'every day', agent: b, prompt: p}}\n")
    try:
        load_file(path)
    except ConfigError as exc:
        assert any(p.startswith("schedules.s.cron:") for p in exc.problems), exc.problems
    else:
        raise AssertionError("a bad cron was accepted")
