"""Feishu run results and reminders are idempotent: the ``uuid`` of each post comes from
its outbox item, so when the platform took a post but the caller never heard back, the
outbox retry is deduped by Feishu (within its 1 h window) and one message appears."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from bot.commands.serve_cmd import PlatformRuntime, build_app
from bot.engine import DeliveryRef, DeliveryTarget, Origin, PostKey
from bot.platforms.feishu import build_feishu_platform
from bot.platforms.feishu.adapter import FeishuAdapter
from bot.platforms.feishu.client import FeishuApi
from storage import OutboxItem
from tests.fakes.asgi_server import serve_in_loop
from tests.fakes.feishu_api import FakeFeishuApi
from tests.feishu.conftest import ALICE, APPROVALS, ORIGIN, Feishu, _engine, make_config
from tests.feishu.test_delivery import card


@pytest.fixture
async def impatient(
    tmp_path: Path, fake_api: tuple[FakeFeishuApi, str]
) -> AsyncIterator[Feishu]:
    """The served Feishu app, whose API calls give up after 0.5 s (one attempt), so a
    reply that Feishu takes but answers late is an unknown outcome for the engine."""
    fake, fake_url = fake_api
    engine, database, settings = _engine(tmp_path)
    engine.tuning.backoff_base = 0.2
    config = make_config(fake_url, fake.app_id, request_timeout_seconds=0.5, max_attempts=1)
    platform = build_feishu_platform(settings, engine, config=config)
    runtime = PlatformRuntime("feishu", platform.endpoints(), platform.background_tasks())
    async with serve_in_loop(build_app(engine, [runtime])) as url, \
            httpx.AsyncClient(timeout=10) as http:
        yield Feishu(fake, engine, database, platform, url, http)
    database.dispose()


async def test_result_reply_that_timed_out_is_not_posted_twice(impatient: Feishu) -> None:
    f = impatient
    origin = await f.send_text("@_user_1 deploy: ship v2.0.0")
    card_message = await f.wait_card()
    f.fake.hang_after_accept("message.reply", seconds=1.5)
    assert (await f.post_event(f.click_event(card_message, operator=ALICE))).status_code == 200

    def result_rows() -> list[tuple[str, int]]:
        with f.database.transaction() as session:
            rows = session.scalars(select(OutboxItem).where(
                OutboxItem.kind == "post_run_result"))
            return [(r.state, r.attempts) for r in rows]

    until = time.monotonic() + 20
    while result_rows() != [("done", 2)] and time.monotonic() < until:
        await asyncio.sleep(0.05)
    assert result_rows() == [("done", 2)]  # the first try timed out, the retry finished
    replies = [m for m in f.fake.messages.values() if m.parent_id == origin]
    assert len(replies) == 1, [m.content for m in replies]
    assert "Deployed v2.0.0" in json.loads(replies[0].content)["text"]
    calls = f.fake.calls_to("message.reply")
    assert len(calls) == 2 and calls[0].body["uuid"] == calls[1].body["uuid"]
    assert f.fake.deduped_sends == 1


async def test_uuid_follows_the_post_key(fake_api: tuple[FakeFeishuApi, str]) -> None:
    fake, url = fake_api
    adapter = FeishuAdapter(FeishuApi(make_config(url, fake.app_id)))
    parent = await adapter.deliver(card(), DeliveryTarget("channel", APPROVALS))
    origin = Origin("feishu", ORIGIN, parent.message_id)

    def replies() -> int:
        return sum(1 for m in fake.messages.values() if m.parent_id == parent.message_id)

    first = PostKey("result:run1:5", "run1", attempt=1)
    await adapter.post_run_result(origin, "done", first)
    await adapter.post_run_result(origin, "done", PostKey("result:run1:5", "run1", attempt=2))
    assert replies() == 1
    # Another run that ends with the same text in the same thread is a new post.
    await adapter.post_run_result(origin, "done", PostKey("result:run2:9", "run2"))
    assert replies() == 2
    # Reminders: same rule (one per outbox item and copy).
    copy = DeliveryRef("feishu", parent.channel, parent.message_id)
    for attempt in (1, 2):
        await adapter.remind(card(), copy, "Reminder 1", PostKey("remind:x:7:c", attempt=attempt))
    assert replies() == 3
    # Feishu forgets a uuid after about an hour: a retry later than that posts again.
    fake.clock = _later(fake.clock, 3601)
    await adapter.post_run_result(origin, "done", PostKey("result:run1:5", "run1", attempt=3))
    assert replies() == 4


def _later(clock: Any, seconds: float) -> Any:
    return lambda: clock() + seconds
