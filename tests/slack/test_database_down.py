"""The database goes down under the served app: ``/readyz`` says so, ``/healthz`` stays
alive, and people who ask for something get an error reply instead of silence.

PostgreSQL is reached through a loopback TCP proxy that the test stops (new
connections refused, pooled ones cut) and starts again. SQLite is "down" when its
write lock is held elsewhere (another process stuck in a transaction).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import make_url

from bot.engine.health import DATABASE_DOWN
from tests.fakes.slack_api import FakeSlackAPI
from tests.fakes.tcp_proxy import TcpProxy
from tests.slack.conftest import STARTER, Slack, make_settings, running_system


@pytest.fixture
def proxied_postgres(postgres_url: str) -> Iterator[tuple[TcpProxy, str]]:
    """A fresh PostgreSQL database reached through a proxy the test can stop."""
    url = make_url(postgres_url)
    with TcpProxy(url.host or "127.0.0.1", url.port or 5432) as proxy:
        yield proxy, url.set(host="127.0.0.1", port=proxy.port).render_as_string(
            hide_password=False)


async def _get(slack: Slack, path: str) -> httpx.Response:
    started = time.monotonic()
    response = await slack.http.get(slack.url + path)
    assert time.monotonic() - started < 5.0, f"{path} took too long"
    return response


async def _ephemeral(slack: Slack, seen: int, timeout: float = 10.0) -> str:
    """The next response_url reply after the first ``seen`` ones."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        calls = slack.fake.response_url_calls
        if len(calls) > seen:
            return str(calls[seen].get("text"))
        await asyncio.sleep(0.02)
    raise AssertionError("no reply through the response_url")


@pytest.mark.postgres
async def test_postgres_down_readyz_and_error_replies(
    fake_slack: FakeSlackAPI, proxied_postgres: tuple[TcpProxy, str]
) -> None:
    proxy, url = proxied_postgres
    async with running_system(fake_slack, make_settings(url)) as slack:
        assert (await _get(slack, "/readyz")).json() == {"ok": True}
        assert (await slack.command("pending")).status_code == 200
        assert "Nothing is waiting" in await _ephemeral(slack, 0)

        proxy.stop()  # the database is gone: refused connections, dead pool
        ready = await _get(slack, "/readyz")
        assert ready.status_code == 503
        assert ready.json() == {"ok": False, "reason": "database unreachable"}
        assert url.split("@")[0] not in ready.text  # no credentials in the reason
        health = await _get(slack, "/healthz")
        assert health.status_code == 200 and health.json() == {"ok": True}

        assert (await slack.command("pending")).status_code == 200
        assert await _ephemeral(slack, 1) == str(DATABASE_DOWN)

        # A start that cannot be stored starts nothing: no "started" message, the
        # starter alone is told why.
        assert (await slack.command("run deploy ship v9.9.9")).status_code == 200
        assert await _ephemeral(slack, 2) == str(DATABASE_DOWN)
        assert not [m for m in slack.fake.messages.values() if "started" in m.text]

        mention = {"type": "app_mention", "user": STARTER, "channel": "C0ORIGIN",
                   "text": "<@UBOT> deploy: ship v9.9.8", "ts": "1700000000.000500"}
        assert (await slack.event(mention, "Ev0DBDOWN")).status_code == 200
        await slack.wait_until(lambda: [
            c for c in slack.fake.calls_to("chat.postEphemeral")
            if c.body.get("user") == STARTER and c.body.get("text") == str(DATABASE_DOWN)
            and c.body.get("thread_ts") == "1700000000.000500"], what="the mention's error reply")

        proxy.start()  # back: ready again, and commands work again
        await _until_ready(slack)
        assert (await slack.command("pending")).status_code == 200
        assert "Nothing is waiting" in await _ephemeral(slack, 3)


async def _until_ready(slack: Slack, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (await _get(slack, "/readyz")).status_code == 200:
            return
        await asyncio.sleep(0.2)
    raise AssertionError("/readyz never recovered")


async def test_sqlite_locked_is_not_ready(fake_slack: FakeSlackAPI, tmp_path: Path) -> None:
    path = tmp_path / "askhuman.db"
    async with running_system(fake_slack, make_settings(f"sqlite:///{path}")) as slack:
        assert (await _get(slack, "/readyz")).status_code == 200
        stuck = sqlite3.connect(path, isolation_level=None)  # another process, stuck
        stuck.execute("BEGIN IMMEDIATE")
        try:
            ready = await _get(slack, "/readyz")
            body: dict[str, Any] = json.loads(ready.text)
            assert ready.status_code == 503 and body["ok"] is False
            assert body["reason"] in ("database unreachable", "database check timed out")
            assert (await _get(slack, "/healthz")).status_code == 200
        finally:
            stuck.execute("ROLLBACK")
            stuck.close()
        await _until_ready(slack)  # a probe begun under the lock may still be finishing
