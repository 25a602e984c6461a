"""Readiness probe and the "database is down" classification (unit level; the served
app is tested in tests/slack/test_database_down.py and tests/feishu/)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import httpx
from sqlalchemy.exc import IntegrityError, OperationalError

from bot.engine.health import DatabaseProbe, database_unreachable
from bot.web import create_app
from storage import Database


def test_database_unreachable_classifies_by_cause() -> None:
    down = OperationalError("SELECT 1", {}, ConnectionRefusedError("refused"))
    assert database_unreachable(down)
    assert database_unreachable(sqlite3.OperationalError("database is locked"))
    try:
        try:
            raise down
        except OperationalError as exc:
            raise RuntimeError("storing failed") from exc
    except RuntimeError as wrapped:
        assert database_unreachable(wrapped)
    assert not database_unreachable(ValueError("bad value"))
    assert not database_unreachable(IntegrityError("INSERT", {}, Exception("dup")))


async def test_sqlite_probe_needs_the_file(tmp_path: Path) -> None:
    path = tmp_path / "askhuman.db"
    database = Database(f"sqlite:///{path}")
    database.upgrade()
    probe = DatabaseProbe(database, timeout=1.0)
    assert await probe.check() is None
    database.dispose()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    assert await probe.check() == "database unreachable"
    assert not path.exists()  # the probe never creates an empty database


async def test_probe_is_single_flight_and_bounded(tmp_path: Path) -> None:
    database = Database(f"sqlite:///{tmp_path / 'x.db'}")
    probe = DatabaseProbe(database, timeout=0.1)
    calls: list[float] = []
    release = threading.Event()

    def hanging_ping() -> None:
        calls.append(time.monotonic())
        release.wait(5)

    probe._ping = hanging_ping  # type: ignore[method-assign]
    started = time.monotonic()
    reasons = await asyncio.gather(*(probe.check() for _ in range(5)))
    assert reasons == ["database check timed out"] * 5
    assert time.monotonic() - started < 1.0
    assert len(calls) == 1  # one thread for all concurrent probes, not five
    release.set()
    database.dispose()


async def test_readyz_routes() -> None:
    async def down() -> str | None:
        return "database unreachable"

    for ready, status in ((None, 200), (down, 503)):
        app = create_app([], ready=ready)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            response = await client.get("/readyz")
            assert response.status_code == status
            assert (await client.get("/healthz")).status_code == 200
    assert response.json() == {"ok": False, "reason": "database unreachable"}
