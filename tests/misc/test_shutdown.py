"""``serve``'s shutdown closes everything in order, once, even when a step fails or
hangs (``bot/shutdown.py``, ``serve_cmd.shutdown_steps``)."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text

from bot.commands.serve_cmd import PlatformRuntime, build_app
from bot.shutdown import Shutdown, stop_tasks
from tests.engine.helpers import make_engine


async def test_steps_run_in_order_once_and_past_a_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[str] = []

    async def record(name: str) -> None:
        ran.append(name)

    async def broken() -> None:
        ran.append("broken")
        raise RuntimeError("the platform is gone")

    shutdown = Shutdown()
    shutdown.add("first", lambda: record("first"))
    shutdown.add("broken", broken)
    shutdown.add("last", lambda: record("last"))
    with caplog.at_level(logging.INFO, logger="askhuman.shutdown"):
        assert await shutdown.run() == ["broken"]
        assert await shutdown.run() == []  # a second run closes nothing twice
    assert ran == ["first", "broken", "last"]
    failure = next(r for r in caplog.records if r.getMessage() == "shutdown step failed")
    assert failure.__dict__["step"] == "broken" and failure.levelno == logging.ERROR


async def test_a_hung_step_is_given_up_and_the_rest_still_run() -> None:
    ran: list[str] = []

    async def hang() -> None:
        await asyncio.sleep(3600)

    async def last() -> None:
        ran.append("last")

    shutdown = Shutdown(timeout=0.05)
    shutdown.add("hung", hang)
    shutdown.add("last", last)
    assert await shutdown.run() == ["hung"]
    assert ran == ["last"]


async def test_background_tasks_that_ignore_stop_are_cancelled_and_unwound() -> None:
    unwound = asyncio.Event()

    async def stubborn() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            unwound.set()  # e.g. closing a websocket: runs before the clients go

    async def failing() -> None:
        raise RuntimeError("boom")

    tasks = [asyncio.create_task(stubborn()), asyncio.create_task(failing())]
    await stop_tasks(tasks, grace=0.05, cancel_wait=1)
    assert unwound.is_set() and tasks[0].cancelled()
    assert isinstance(tasks[1].exception(), RuntimeError)


async def test_the_lifespan_closes_every_platform_and_the_database_despite_a_failure(
    tmp_path: Path,
) -> None:
    engine, _, _ = make_engine(f"sqlite:///{tmp_path / 'askhuman.db'}")
    closed: list[str] = []

    async def broken() -> None:
        closed.append("broken")
        raise RuntimeError("cannot close")

    async def fine() -> None:
        closed.append("fine")

    runtimes = [PlatformRuntime("one", closers=[broken]), PlatformRuntime("two", closers=[fine])]
    app = build_app(engine, runtimes, owns_database=True)
    async with app.router.lifespan_context(app):
        with engine.db.transaction() as session:  # a connection to close later
            session.execute(text("select 1"))
            dbapi = session.connection().connection.dbapi_connection
    assert closed == ["broken", "fine"]
    with pytest.raises(sqlite3.ProgrammingError):  # disposed: closed, though it was
        dbapi.execute("select 1")  # this thread's kept connection (``KeptSessions``)
    assert engine.db.engine.pool.checkedin() == 0  # and none left in the pool
