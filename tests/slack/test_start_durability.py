"""Once Slack has our ack of ``/askhuman run``, the start is in the database: kill -9
right after the ack (or in the middle of the first model call), restart, and the run
starts exactly once (one run, one "started" message, one first-leg outcome)."""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from storage import AuditLog, Database, HumanRequest, Run, RunStart
from tests.fakes.asgi_server import free_port
from tests.fakes.slack_api import FakeSlackAPI
from tests.slack.conftest import ALICE, APPROVALS, ORIGIN, STARTER, Slack
from tests.slack.test_click_durability import _serve, _wait_healthy


def _count(database: Database, model: Any, *where: Any) -> int:
    with database.transaction() as s:
        return int(s.scalar(select(func.count()).select_from(model).where(*where)) or 0)


def _starts(database: Database) -> list[tuple[str, str | None]]:
    with database.transaction() as s:
        return [(r.state, r.outcome) for r in s.scalars(select(RunStart).order_by(RunStart.id))]


def _roots(fake: FakeSlackAPI) -> list[str]:
    """The "started" messages (thread roots) in the channel the command came from."""
    return [m.ts for m in list(fake.messages.values())
            if m.channel == ORIGIN and not m.thread_ts and "started *deploy*" in m.text]


def _cards(fake: FakeSlackAPI) -> list[str]:
    return [m.ts for m in list(fake.messages.values()) if m.channel == APPROVALS and m.blocks]


async def _until(check: Any, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.1)


@pytest.mark.parametrize("crash", ["--hang-start", "--hang-leg"])
async def test_kill_9_right_after_the_ack_of_a_run_starts_it_once(
    db_url: str, crash: str,
) -> None:
    with FakeSlackAPI() as fake:
        fake.add_users([ALICE, STARTER])
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        first = _serve(port, db_url, fake.base_url, crash, "--lease", "1")
        try:
            await _wait_healthy(url, first)
            async with httpx.AsyncClient(timeout=10) as http:
                slack = Slack(url=url, fake=fake, engine=None, database=None,  # type: ignore[arg-type]
                              http=http)
                response = await slack.command("run deploy ship v1.2.3")
                if crash == "--hang-start":
                    first.send_signal(signal.SIGKILL)  # the moment the 200 arrived
                else:  # the run began (its thread and row exist); the model call hangs
                    watch = Database(db_url)
                    await _until(lambda: _roots(fake) and _count(watch, Run),
                                 "the run never began")
                    watch.dispose()
                    first.send_signal(signal.SIGKILL)
                assert response.status_code == 200 and response.text == ""
        finally:
            first.kill()
            first.communicate(timeout=10)
        database = Database(db_url)
        # Acked, then the process died before the first leg's outcome: the start is stored.
        assert _starts(database) == [("running", None)]
        assert _count(database, Run) == (0 if crash == "--hang-start" else 1)
        assert _count(database, HumanRequest) == 0

        second = _serve(port, db_url, fake.base_url)  # the restart
        try:
            await _wait_healthy(url, second)
            await _until(lambda: _starts(database) == [("done", "started")],
                         "the stored start never ran")
            await _until(lambda: _cards(fake), "the run's card was never posted")
            await asyncio.sleep(1.0)  # a second run or message would show up by now
        finally:
            second.terminate()
            second.communicate(timeout=15)
        assert _count(database, Run) == 1
        assert _count(database, HumanRequest) == 1  # one first-leg outcome: one request
        assert len(_cards(fake)) == 1
        assert len(_roots(fake)) == 1  # one "started" message, even across the crash
        assert _count(database, AuditLog, AuditLog.event == "run_started") == 1
        with database.transaction() as s:
            run = s.scalars(select(Run)).one()
            assert (run.origin_channel, run.origin_thread) == (ORIGIN, _roots(fake)[0])
            assert run.started_by_user == STARTER
        database.dispose()
