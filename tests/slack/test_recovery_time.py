"""How soon a restarted process finishes what a killed one left (Slack, SQLite, kill -9).

The guarantees section of the README promises: a click acknowledged just before the
kill is applied within 5 s of the restart, and card updates, final answers and resumes
that were in flight finish within 10 s of it, each exactly once. Default leases are
used (no test knob): what makes it quick is the dead process's stale heartbeat
(``bot.engine.instances``), not a short lease. The bounds are from the moment the new
process answers ``/healthz``; the figures seen are in ``benchmarks/README.md``.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from sqlalchemy import select

from storage import AuditLog, ClickInbox, Database, HumanRequest, OutboxItem, ResumeJob
from tests.fakes.asgi_server import free_port
from tests.fakes.slack_api import FakeSlackAPI
from tests.slack.conftest import ALICE, APPROVALS, ORIGIN, Slack
from tests.slack.test_click_durability import _count, _new_card, _serve, _wait_healthy

APPLIED_WITHIN = 5.0
FINISHED_WITHIN = 10.0


@asynccontextmanager
async def _first_process(
    fake: FakeSlackAPI, db_url: str, port: int, *flags: str,
) -> AsyncIterator[tuple[Slack, subprocess.Popen[bytes]]]:
    url = f"http://127.0.0.1:{port}"
    proc = _serve(port, db_url, fake.base_url, *flags)
    try:
        await _wait_healthy(url, proc)
        async with httpx.AsyncClient(timeout=10) as http:
            yield Slack(url=url, fake=fake, engine=None, database=None,  # type: ignore[arg-type]
                        http=http), proc
    finally:
        proc.kill()
        proc.communicate(timeout=10)  # reaps it and closes its stderr pipe


async def _until(check: Callable[[], bool], within: float, what: str) -> float:
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < within, f"{what} took over {within} s"
        await asyncio.sleep(0.05)
    return time.monotonic() - started


@asynccontextmanager
async def _restarted(fake: FakeSlackAPI, db_url: str, port: int) -> AsyncIterator[None]:
    """The restart: a new process on the same database, up (``/healthz``) when entered,
    stopped and reaped on the way out."""
    proc = _serve(port, db_url, fake.base_url)
    try:
        await _wait_healthy(f"http://127.0.0.1:{port}", proc)
        yield
    finally:
        proc.terminate()
        proc.communicate(timeout=15)


@asynccontextmanager
async def _crash_site(tmp_path: Path) -> AsyncIterator[tuple[FakeSlackAPI, Database, str, int]]:
    """A fake Slack, a SQLite file and a port for the first process and its restart."""
    db_url = f"sqlite:///{tmp_path / 'crash.db'}"
    database = Database(db_url)
    try:
        with FakeSlackAPI() as fake:
            fake.add_users([ALICE, "U0STARTER"])
            yield fake, database, db_url, free_port()
    finally:
        database.dispose()


async def _approve(slack: Slack) -> None:
    ts = await _new_card(slack)
    assert (await slack.interact(slack.click_payload(ts, "Approve", ALICE))).status_code == 200


def _final_answers(fake: FakeSlackAPI) -> list[str]:
    return [m.text for m in fake.messages.values() if m.channel == ORIGIN and m.thread_ts]


def _updated_cards(fake: FakeSlackAPI) -> int:
    return len([c for c in fake.calls_to("chat.update") if c.body.get("channel") == APPROVALS])


async def test_a_click_acked_before_the_kill_is_applied_within_5_s_of_the_restart(
    tmp_path: Path,
) -> None:
    async with _crash_site(tmp_path) as (fake, database, db_url, port):
        async with _first_process(fake, db_url, port, "--hang") as (slack, first):
            ts = await _new_card(slack)
            response = await slack.interact(slack.click_payload(ts, "Approve", ALICE))
            first.send_signal(signal.SIGKILL)
            assert response.status_code == 200
        async with _restarted(fake, db_url, port):
            applied = await _until(lambda: _count(database, HumanRequest,
                                                  HumanRequest.status == "submitted") == 1,
                                   APPLIED_WITHIN, "applying the stored click")
            answered = applied + await _until(lambda: bool(_final_answers(fake)),
                                              FINISHED_WITHIN, "the final answer")
            print(f"click applied {applied:.2f} s, answer posted {answered:.2f} s after up")
        assert _count(database, AuditLog, AuditLog.event == "decided") == 1
        assert _count(database, AuditLog, AuditLog.event == "resumed") == 1
        with database.transaction() as s:
            assert [r.state for r in s.scalars(select(ClickInbox))] == ["done"]
        assert len(_final_answers(fake)) == 1


async def test_card_updates_and_final_answers_in_flight_finish_within_10_s(
    tmp_path: Path,
) -> None:
    async with _crash_site(tmp_path) as (fake, database, db_url, port):
        async with _first_process(fake, db_url, port, "--hang-outbox") as (slack, first):
            await _approve(slack)
            await _until(lambda: _count(database, OutboxItem, OutboxItem.state == "running",
                                        OutboxItem.kind == "post_run_result") == 1,
                         30, "the resume")
            first.send_signal(signal.SIGKILL)
        assert _updated_cards(fake) == 0 and _final_answers(fake) == []
        async with _restarted(fake, db_url, port):
            took = await _until(
                lambda: _updated_cards(fake) >= 1 and bool(_final_answers(fake)),
                FINISHED_WITHIN, "the card update and the final answer")
            print(f"card update and final answer {took:.2f} s after up")
            await asyncio.sleep(1)  # nothing more arrives: each went out once
        assert len(_final_answers(fake)) == 1
        assert _count(database, OutboxItem, OutboxItem.state != "done") == 0


async def test_a_resume_in_flight_finishes_within_10_s_of_the_restart(tmp_path: Path) -> None:
    async with _crash_site(tmp_path) as (fake, database, db_url, port):
        async with _first_process(fake, db_url, port, "--hang-resume") as (slack, first):
            await _approve(slack)
            await _until(lambda: _count(database, ResumeJob, ResumeJob.state == "running") == 1,
                         30, "claiming the resume")
            first.send_signal(signal.SIGKILL)
        assert _final_answers(fake) == []
        async with _restarted(fake, db_url, port):
            took = await _until(lambda: bool(_final_answers(fake)), FINISHED_WITHIN,
                                "the resumed run's final answer")
            print(f"resumed and answered {took:.2f} s after up")
        assert _count(database, AuditLog, AuditLog.event == "resumed") == 1
        assert len(_final_answers(fake)) == 1
