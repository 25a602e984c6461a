"""Two replicas (two engines + platforms + servers) on one database: a Feishu re-push or
a replayed request reaching the *other* replica is recognized there too; refusals of
authenticated callbacks are audited; a failed card patch after a click is retried."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from sqlalchemy import func, select

from bot.commands.serve_cmd import PlatformRuntime, build_app
from bot.engine import Engine
from bot.platforms.feishu import build_feishu_platform
from storage import AuditLog, Database, Run
from tests.fakes.asgi_server import serve_in_loop
from tests.fakes.feishu_api import FakeFeishuApi
from tests.fakes.feishu_signing import bot_mention, message_event, sign_event
from tests.feishu.conftest import (
    ALICE,
    ENCRYPT_KEY,
    MALLORY,
    ORIGIN,
    STARTER,
    VERIFICATION_TOKEN,
    Feishu,
    card_ref,
    make_config,
    make_settings,
    runtimes,
)


@asynccontextmanager
async def second_replica(
    f: Feishu, fake_api: tuple[FakeFeishuApi, str]
) -> AsyncIterator[Feishu]:
    """Another process of the same deployment: own engine, platform and HTTP server."""
    fake, fake_url = fake_api
    settings = make_settings(f.database.url)
    database = Database(f.database.url)
    engine = Engine(database, settings, runtimes(settings))
    platform = build_feishu_platform(settings, engine, config=make_config(fake_url, fake.app_id))
    runtime = PlatformRuntime("feishu", platform.endpoints(), platform.background_tasks())
    async with serve_in_loop(build_app(engine, [runtime])) as url, \
            httpx.AsyncClient(timeout=10) as http:
        yield Feishu(fake, engine, database, platform, url, http)
    database.dispose()


def _runs(f: Feishu) -> int:
    with f.database.transaction() as session:
        return int(session.scalar(select(func.count()).select_from(Run)) or 0)


def _refusals(f: Feishu) -> list[tuple[str | None, str | None, dict[str, Any]]]:
    with f.database.transaction() as session:
        rows = session.scalars(select(AuditLog).where(AuditLog.event == "adapter_refused")
                               .order_by(AuditLog.id))
        return [(r.request_ref, r.actor_user, dict(r.details)) for r in rows]


def _checks(f: Feishu) -> list[str]:
    """The check of every refusal, repeats included (they share a counted row)."""
    with f.database.transaction() as session:
        rows = session.scalars(select(AuditLog).where(AuditLog.event == "adapter_refused")
                               .order_by(AuditLog.id))
        return [str(r.details.get("check")) for r in rows for _ in range(r.occurrences)]


async def test_message_re_push_to_another_replica_starts_one_run(
    feishu_http: Feishu, fake_api: tuple[FakeFeishuApi, str]
) -> None:
    f = feishu_http
    async with second_replica(f, fake_api) as g:
        event = message_event(token=VERIFICATION_TOKEN, sender=STARTER, chat_id=ORIGIN,
                              text="@_user_1 deploy: ship v7.0.0", mentions=[bot_mention()],
                              app_id=f.fake.app_id)
        assert (await f.post_event(event)).status_code == 200
        await f.wait_card()
        # Feishu re-pushes the same event (fresh nonce); this time it lands on replica 2.
        assert (await g.post_event(event)).status_code == 200
        await g.platform.handlers.drain()
        await asyncio.sleep(0.2)
        assert _runs(f) == 1
        # A re-push under a new event id but the same message is a duplicate as well.
        event["header"]["event_id"] = uuid.uuid4().hex
        assert (await g.post_event(event)).status_code == 200
        await g.platform.handlers.drain()
        assert _runs(f) == 1
        assert _checks(f) == ["duplicate_message", "duplicate_message"]


async def test_click_re_push_to_another_replica_is_ignored_and_audited(
    feishu_http: Feishu, fake_api: tuple[FakeFeishuApi, str]
) -> None:
    f = feishu_http
    await f.send_text("@_user_1 deploy: ship v7.0.1")
    card = await f.wait_card()
    async with second_replica(f, fake_api) as g:
        event_id = uuid.uuid4().hex
        refused = await f.post_event(f.click_event(card, operator=MALLORY, event_id=event_id))
        assert refused.json()["toast"]["type"] == "error"
        await f.settle()
        # The same callback (new nonce) on replica 2: already handled, answered with {}.
        again = await g.post_event(f.click_event(card, operator=MALLORY, event_id=event_id))
        assert again.status_code == 200 and again.json() == {}
        assert await f.status(card) == "pending"
        assert _refusals(f) == [(card_ref(card), MALLORY, {
            "platform": "feishu", "check": "duplicate_event", "event_id": event_id})]
        assert f.audit_events().count("respond_unauthorized") == 1  # refused once
        # Alice can still decide, on either replica.
        ok = await g.post_event(f.click_event(card, operator=ALICE))
        assert ok.json()["toast"]["type"] in ("success", "info")
        await f.wait_patch(card)


async def test_nonce_replayed_on_another_replica_is_rejected_and_audited(
    feishu_http: Feishu, fake_api: tuple[FakeFeishuApi, str]
) -> None:
    f = feishu_http
    await f.send_text("@_user_1 deploy: ship v7.0.2")
    card = await f.wait_card()
    async with second_replica(f, fake_api) as g:
        captured = sign_event(f.click_event(card, operator=MALLORY), ENCRYPT_KEY)
        assert (await f.post_signed(captured)).json()["toast"]["type"] == "error"
        assert (await g.post_signed(captured)).status_code == 401
        assert "replayed_nonce" in _checks(f)
        # A forged signature is only logged: no audit row for unauthenticated junk.
        before = len(_refusals(f))
        forged = sign_event(f.click_event(card), "not-the-key")
        assert (await g.post_signed(forged)).status_code == 401
        assert len(_refusals(f)) == before
    assert await f.status(card) == "pending"


async def test_mismatched_and_unknown_cards_are_audited(feishu_http: Feishu) -> None:
    f = feishu_http
    await f.send_text("@_user_1 deploy: ship v7.0.3")
    card = await f.wait_card()
    await f.send_text("@_user_1 deploy: ship v7.0.4")
    other = await f.wait_card()
    await f.click(card, expect="error", ref=card_ref(other))
    event = f.click_event(card)
    event["event"]["context"]["open_message_id"] = "om_somewhere_else"
    assert (await f.post_event(event)).json()["toast"]["type"] == "error"
    await f.settle()
    import time

    old_ms = str(int((time.time() - 3600) * 1000))
    assert (await f.post_event(f.click_event(card, create_time=old_ms))).json()[
        "toast"]["type"] == "error"
    await f.platform.handlers.drain()
    refusals = _refusals(f)
    assert [d["check"] for _, _, d in refusals] == [
        "ref_mismatch", "unknown_message", "stale_event"]
    assert refusals[0][0] == card_ref(other) and refusals[0][1] == ALICE
    assert refusals[0][2]["card_ref"] == card_ref(card)
    assert refusals[1][2]["message_id"] == "om_somewhere_else"
    assert await f.status(card) == "pending" and await f.status(other) == "pending"


async def test_failed_patch_after_a_click_is_retried_by_the_outbox(
    feishu_http: Feishu,
) -> None:
    f = feishu_http
    f.engine.tuning.backoff_base = 0.05  # the outbox retry comes quickly
    await f.send_text("@_user_1 deploy: ship v7.0.5")
    card = await f.wait_card()
    # Every attempt the API client makes for the first patch fails (it retries 3×).
    f.fake.fail_next("message.patch", 3, status=500)
    response = await f.post_event(f.click_event(card, operator=ALICE))
    assert response.json()["toast"]["type"] == "success"  # decided; the card follows
    patched = await f.wait_patch(card)  # ...then the outbox's retry goes through
    assert "form" not in str(patched["body"])
    calls = f.fake.calls_to("message.patch")
    assert [c.status for c in calls][:3] == [500, 500, 500]
    assert f.fake.successful("message.patch")
    assert f.clock is not None and calls[0].at >= f.clock.sent[-1]
    assert "outbox_retry" in f.audit_events()
    assert await f.status(card) == "submitted"
