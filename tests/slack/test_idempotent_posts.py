"""kill -9 while Slack is accepting a post: the surviving replica never posts it twice.

A real ``serve``-wired app runs in a child process against the fake Slack API. The fake
takes the post (the message exists) and never answers, the child is killed with
SIGKILL, and a second replica on the same database takes the outbox item over once the
dead one's short lease ran out. It finds the first post by its message metadata
(``conversations.replies`` / ``conversations.history`` with ``include_all_metadata``)
and does not post again: one result in the thread, one card in the channel, and that
card works.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import select

from bot.engine.core import Engine
from bot.engine.ports import Origin, PostKey
from bot.platforms.slack.adapter import SlackAdapter
from bot.settings import Settings
from storage import Database, Delivery, OutboxItem
from tests.fakes.asgi_server import free_port
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackAPI, Message
from tests.slack.conftest import ALICE, APPROVALS, ORIGIN, Slack, running_system

ROOT = Path(__file__).resolve().parents[2]
LEASE = 1.0
KNOBS: dict[str, Any] = {"lease_seconds": LEASE, "outbox_lease_seconds": LEASE,
                         "heartbeat_seconds": LEASE / 5}


@asynccontextmanager
async def served_child(fake: FakeSlackAPI, settings: Settings) -> AsyncIterator[
        tuple[subprocess.Popen[str], Slack]]:
    """``askhuman serve`` (Slack HTTP mode) in a child process, and a client for it."""
    port = free_port()
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.slack.serve_child", settings.database_url,
         fake.base_url, str(port), str(LEASE)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    database = Database(settings.database_url)
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            deadline = time.monotonic() + 60
            while True:
                assert child.poll() is None, child.communicate()[1]
                assert time.monotonic() < deadline, "the child app never started"
                try:
                    if (await http.get(url + "/healthz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
            yield child, Slack(url=url, fake=fake, engine=Engine(database, settings),
                               database=database, http=http)
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate(timeout=30)  # reaps it and closes its stderr pipe
        database.dispose()


async def kill_when_hung(fake: FakeSlackAPI, child: subprocess.Popen[str]) -> None:
    """SIGKILL the child once the fake took the hanging post (the message exists)."""
    deadline = time.monotonic() + 30
    while not fake.hung.is_set():
        assert child.poll() is None, child.communicate()[1]
        assert time.monotonic() < deadline, "the post never reached the fake"
        await asyncio.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    assert child.returncode == -signal.SIGKILL


def outbox_rows(database: Database) -> list[tuple[str, str, int]]:
    with database.transaction() as session:
        rows = session.scalars(select(OutboxItem).order_by(OutboxItem.id))
        return [(r.kind, r.state, r.attempts) for r in rows]


def result_posts(fake: FakeSlackAPI) -> list[Message]:
    return [m for m in fake.messages.values()
            if m.channel == ORIGIN and m.thread_ts and m.text.startswith("Deployed")]


def is_result(body: Mapping[str, Any]) -> bool:
    return bool(body.get("thread_ts")) and str(body.get("text", "")).startswith("Deployed")


def is_card(body: Mapping[str, Any]) -> bool:
    return body.get("channel") == APPROVALS and bool(body.get("blocks"))


async def test_result_posted_once_after_kill_during_post_message(
    fake_slack: FakeSlackAPI, settings: Settings
) -> None:
    fake_slack.hang_after_accept("chat.postMessage", is_result)
    async with served_child(fake_slack, settings) as (child, first):
        assert (await first.command("run deploy ship v4.0.0")).status_code == 200
        ts = await first.wait_for_card(timeout=30)
        click = await first.interact(first.click_payload(ts, "Approve", ALICE))
        assert click.status_code == 200
        await kill_when_hung(fake_slack, child)
    assert len(result_posts(fake_slack)) == 1  # Slack has it; the dead replica never knew
    assert ("post_run_result", "running", 1) in outbox_rows(first.database)

    async with running_system(fake_slack, settings, **KNOBS) as survivor:
        await survivor.wait_until(
            lambda: all(state == "done" for _, state, _ in outbox_rows(survivor.database)),
            timeout=20, what="the survivor finishing the dead replica's post")
        await asyncio.sleep(0.5)
    assert ("post_run_result", "done", 2) in outbox_rows(survivor.database)
    posts = result_posts(fake_slack)
    assert len(posts) == 1, [m.text for m in posts]
    assert posts[0].metadata is not None
    assert posts[0].metadata["event_type"] == "askhuman_post"
    lookups = fake_slack.calls_to("conversations.replies")
    assert lookups and lookups[-1].body.get("ts") == posts[0].thread_ts


async def test_card_delivered_once_after_kill_during_post_message(
    fake_slack: FakeSlackAPI, settings: Settings
) -> None:
    fake_slack.hang_after_accept("chat.postMessage", is_card)
    async with served_child(fake_slack, settings) as (child, first):
        assert (await first.command("run deploy ship v4.1.0")).status_code == 200
        await kill_when_hung(fake_slack, child)
    cards = [m for m in fake_slack.messages.values() if m.channel == APPROVALS and m.blocks]
    assert len(cards) == 1
    with first.database.transaction() as session:
        assert session.scalars(select(Delivery)).all() == []  # it died before recording

    async with running_system(fake_slack, settings, **KNOBS) as survivor:
        await survivor.wait_until(lambda: _delivered(survivor.database), timeout=20,
                                  what="the survivor recording the card")
        cards = [m for m in fake_slack.messages.values() if m.channel == APPROVALS and m.blocks]
        assert len(cards) == 1, "the card was posted a second time"
        assert fake_slack.calls_to("conversations.history")
        click = await survivor.interact(survivor.click_payload(cards[0].ts, "Approve", ALICE))
        assert click.status_code == 200
        await survivor.wait_until(lambda: result_posts(fake_slack), timeout=20,
                                  what="the final answer")
        assert survivor.request_row().status == "submitted"
    assert not survivor.ephemerals_to(ALICE)
    assert len(result_posts(fake_slack)) == 1


def _delivered(database: Database) -> bool:
    with database.transaction() as session:
        return session.scalars(select(Delivery)).first() is not None


async def test_lookup_failure_still_posts(fake_slack: FakeSlackAPI, settings: Settings) -> None:
    """A retry whose lookup fails (e.g. no ``channels:history`` scope) posts anyway:
    a duplicate is better than a lost answer."""
    adapter = SlackAdapter(AsyncWebClient(token=BOT_TOKEN, base_url=fake_slack.base_url))
    root = (await adapter._client.chat_postMessage(channel=ORIGIN, text="started"))["ts"]
    key = PostKey("result:r1:1", "r1", attempt=1)
    await adapter.post_run_result(Origin("slack", ORIGIN, root), "Deployed once", key)
    retry = PostKey("result:r1:1", "r1", attempt=2)
    await adapter.post_run_result(Origin("slack", ORIGIN, root), "Deployed once", retry)
    assert len(fake_slack.thread_replies(ORIGIN, root)) == 1  # found: skipped
    fake_slack.fail("conversations.replies", error="missing_scope")
    await adapter.post_run_result(Origin("slack", ORIGIN, root), "Deployed once", retry)
    assert len(fake_slack.thread_replies(ORIGIN, root)) == 2
    other = PostKey("result:r2:7", "r2", attempt=3)  # another post is never mistaken for it
    await adapter.post_run_result(Origin("slack", ORIGIN, root), "Deployed twice", other)
    assert len(fake_slack.thread_replies(ORIGIN, root)) == 3
