"""Once Slack has our ack, the click is in the database: a crash, a busy database, a
late click or a flood of refusals with slow replies loses or delays nothing."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, select, update

from bot.engine.clicks import NOT_RECORDED
from storage import AuditLog, ClickInbox, Database, HumanRequest, Vote
from tests.fakes.asgi_server import free_port
from tests.fakes.slack_api import FakeSlackAPI
from tests.fakes.sqlite_lock import hold_write_lock
from tests.slack.conftest import ALICE, APPROVALS, MALLORY, ORIGIN, Slack

ROOT = Path(__file__).resolve().parents[2]


def _count(database: Database, model: Any, *where: Any) -> int:
    with database.transaction() as s:
        return int(s.scalar(select(func.count()).select_from(model).where(*where)) or 0)


def _inbox(database: Database) -> list[tuple[str, str | None]]:
    with database.transaction() as s:
        return [(r.state, r.outcome) for r in s.scalars(select(ClickInbox).order_by(ClickInbox.id))]


def _cards(fake: FakeSlackAPI) -> list[str]:
    return [m.ts for m in list(fake.messages.values()) if m.channel == APPROVALS and m.blocks]


async def _new_card(slack: Slack, version: str = "v1.0.0") -> str:
    before = set(_cards(slack.fake))
    assert (await slack.command(f"run deploy ship {version}")).status_code == 200
    await slack.wait_until(lambda: set(_cards(slack.fake)) - before, what="a new card")
    return (set(_cards(slack.fake)) - before).pop()


# ---------------------------------------------------------------- kill -9 after the ack


def _serve(port: int, db_url: str, api_url: str, *flags: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "ASKHUMAN_"))}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.slack.click_child", str(port), db_url, api_url, *flags],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


async def _wait_healthy(url: str, proc: subprocess.Popen[bytes]) -> None:
    async with httpx.AsyncClient() as http:
        for _ in range(500):
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                if (await http.get(url + "/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
    raise AssertionError("the server did not come up")


async def test_kill_9_right_after_the_ack_loses_nothing(tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'crash.db'}"
    with FakeSlackAPI() as fake:
        fake.add_users([ALICE, "U0STARTER"])
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        first = _serve(port, db_url, fake.base_url, "--hang", "--lease", "1")
        try:
            await _wait_healthy(url, first)
            async with httpx.AsyncClient(timeout=10) as http:
                slack = Slack(url=url, fake=fake, engine=None, database=None,  # type: ignore[arg-type]
                              http=http)
                ts = await _new_card(slack)
                response = await slack.interact(slack.click_payload(ts, "Approve", ALICE))
                first.send_signal(signal.SIGKILL)  # the moment the 200 arrived
                assert response.status_code == 200
        finally:
            first.kill()
            first.communicate(timeout=10)  # reaps it and closes its stderr pipe
        database = Database(db_url)
        # Acked, then the process died before deciding: the click is in the database.
        assert _inbox(database) == [("running", None)]
        assert _count(database, HumanRequest, HumanRequest.status == "pending") == 1
        assert _count(database, AuditLog, AuditLog.event == "decided") == 0

        second = _serve(port, db_url, fake.base_url)  # the restart
        try:
            await _wait_healthy(url, second)
            deadline = time.monotonic() + 20
            while _count(database, HumanRequest, HumanRequest.status == "submitted") == 0:
                assert time.monotonic() < deadline, "the stored click was never decided"
                await asyncio.sleep(0.1)
            while not [c for c in fake.calls_to("chat.postEphemeral")
                       if c.body.get("user") == ALICE]:
                assert time.monotonic() < deadline, "the clicker was never told"
                await asyncio.sleep(0.1)
            while not [m for m in fake.messages.values() if m.thread_ts and m.channel == ORIGIN]:
                assert time.monotonic() < deadline, "the run never resumed"
                await asyncio.sleep(0.1)
        finally:
            second.terminate()
            second.communicate(timeout=15)
        told = [c.body for c in fake.calls_to("chat.postEphemeral")]
        assert told == [{**told[0], "channel": APPROVALS, "user": ALICE,
                         "text": "Thanks, your answer (Approve) was recorded."}]
        assert _count(database, AuditLog, AuditLog.event == "decided") == 1
        assert _count(database, Vote) == 1
        assert _inbox(database) == [("done", "accepted")]
        with database.transaction() as s:
            decider = s.scalars(select(HumanRequest.decided_by_user)).one()
        assert decider == ALICE
        database.dispose()


# ---------------------------------------------------------------- a busy database



async def _with_lock_held(slack: Slack, seconds: float, ts: str) -> tuple[httpx.Response, float]:
    path = Path(slack.database.url.removeprefix("sqlite:///"))
    held = threading.Event()
    locker = threading.Thread(target=hold_write_lock, args=(path, seconds, held))
    locker.start()
    held.wait(5)
    started = time.monotonic()
    response = await slack.interact(slack.click_payload(ts, "Approve", ALICE))
    elapsed = time.monotonic() - started
    await asyncio.to_thread(locker.join)
    return response, elapsed


async def test_a_click_the_database_cannot_store_in_time_gets_an_error(slack: Slack) -> None:
    ts = await _new_card(slack)
    response, elapsed = await _with_lock_held(slack, 4.0, ts)
    assert response.status_code == 200 and elapsed < 3.0  # acked within Slack's 3 s...
    await slack.wait_until(lambda: slack.ephemerals_to(ALICE), what="an ephemeral")
    assert slack.ephemerals_to(ALICE) == [str(NOT_RECORDED)]  # ...but never silently
    await asyncio.sleep(0.5)
    await slack.engine.recover_clicks()
    assert slack.request_row().status == "pending"
    assert _count(slack.database, Vote) == 0
    assert all(state == "failed" for state, _ in _inbox(slack.database))
    # Clicking again, as the message asks, works.
    await slack.interact(slack.click_payload(ts, "Approve", ALICE))
    await slack.wait_until(lambda: slack.request_row().status == "submitted", what="decided")


async def test_a_briefly_busy_database_only_delays_the_click(slack: Slack) -> None:
    ts = await _new_card(slack)
    response, elapsed = await _with_lock_held(slack, 1.0, ts)
    assert response.status_code == 200 and 0.5 < elapsed < 3.0
    await slack.wait_until(lambda: slack.request_row().status == "submitted", what="decided")
    assert slack.request_row().decided_by_user == ALICE
    assert str(NOT_RECORDED) not in slack.ephemerals_to(ALICE)
    assert _inbox(slack.database) == [("done", "accepted")]


# ---------------------------------------------------------------- the deadline


async def test_a_click_after_the_deadline_is_refused_even_before_the_sweep(slack: Slack) -> None:
    async def busy_sweep() -> int:  # the timeout sweep has not got there yet
        return 0

    slack.engine.expire_due = busy_sweep  # type: ignore[method-assign]
    ts = await _new_card(slack)
    deadline = dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(seconds=2)
    with slack.database.transaction() as s:
        s.execute(update(HumanRequest).values(deadline=deadline))
    assert (await slack.interact(slack.click_payload(ts, "Approve", ALICE))).status_code == 200
    await slack.wait_until(lambda: slack.ephemerals_to(ALICE), what="an ephemeral")
    expected = f"This request timed out at {deadline:%Y-%m-%d %H:%M} UTC."
    assert slack.ephemerals_to(ALICE) == [expected]
    row = slack.request_row()
    assert row.status == "timeout" and row.result is not None
    assert row.result["action"]["id"] == "__timeout"
    assert ("respond_too_late", "refused", ALICE) in slack.audit()
    assert _count(slack.database, Vote) == 0
    await slack.wait_until(lambda: slack.fake.calls_to("chat.update"), what="card update")


# ---------------------------------------------------------------- refusals vs decisions


async def test_refused_clicks_with_slow_replies_do_not_delay_a_valid_decision(
    slack: Slack,
) -> None:
    refused_card = await _new_card(slack, "v1.0.0")
    valid_card = await _new_card(slack, "v2.0.0")
    slack.fake.delays["chat.postEphemeral"] = 1.5
    strangers = [slack.interact(slack.click_payload(refused_card, "Approve", MALLORY))
                 for _ in range(12)]
    assert all(r.status_code == 200 for r in await asyncio.gather(*strangers))
    started = time.monotonic()
    approve = slack.click_payload(valid_card, "Approve", ALICE)
    assert (await slack.interact(approve)).status_code == 200

    def decided() -> bool:
        with slack.database.transaction() as s:
            return bool(s.scalar(select(func.count()).select_from(HumanRequest)
                                 .where(HumanRequest.status == "submitted")))

    await slack.wait_until(decided, timeout=10, what="the valid decision")
    # Not behind 12 slow "not allowed" replies (12 x 1.5 s over 4 slots was 4.5 s).
    assert time.monotonic() - started < 1.5
    # ...and every stranger is still told why, just later.
    await slack.wait_until(lambda: len(slack.ephemerals_to(MALLORY)) >= 12, timeout=15,
                           what="12 refusals")
    assert all("not allowed" in t for t in slack.ephemerals_to(MALLORY))
