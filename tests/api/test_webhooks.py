"""Webhooks: retried through the outbox until the receiver answers, across restarts."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from pathlib import Path

from sqlalchemy import select
from standardwebhooks import Webhook

from bot.api.keys import SecretBox, new_webhook_secret
from bot.engine import api_clients
from bot.settings import Settings
from storage import AuditLog, OutboxItem
from tests.api.conftest import (
    DEPLOY_ARGS,
    SECRET_KEY,
    Client,
    Door,
    Receiver,
    add_client,
    running_door,
)
from tests.fakes.asgi_server import AsgiServer, free_port, serve_in_loop
from tests.fakes.feishu_api import FakeFeishuApi
from tests.fakes.slack_api import FakeSlackAPI


def webhook_rows(door: Door) -> list[OutboxItem]:
    with door.database.read() as session:
        return list(session.scalars(select(OutboxItem).where(OutboxItem.kind == "webhook")))


async def wait_rows(door: Door, predicate: object, timeout: float = 20.0) -> list[OutboxItem]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = webhook_rows(door)
        if rows and predicate(rows):  # type: ignore[operator]
            return rows
        await asyncio.sleep(0.05)
    raise AssertionError(f"webhook rows never matched: {webhook_rows(door)}")


async def ask_and_approve(door: Door, client: Client, callback: str) -> str:
    created = await door.create(client, {"route": "ops", "args": DEPLOY_ARGS,
                                         "callback_url": callback})
    assert created.status_code == 201, created.text
    ref = str(created.json()["ref"])
    for _ in range(500):
        cards = [m.ts for m in list(door.slack.fake.messages.values())
                 if m.blocks and f"ah:{ref}:" in str(m.blocks)]
        if cards:
            await door.approve_in_slack(cards[0])
            return ref
        await asyncio.sleep(0.02)
    raise AssertionError(f"no card for {ref}")


async def test_receiver_down_then_back_across_a_restart(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], settings: Settings
) -> None:
    port = free_port()
    callback = f"http://127.0.0.1:{port}/hook"
    async with running_door(fake_slack, fake_feishu, settings) as first:
        client = add_client(first.database, "ci", ["ops"])
        ref = await ask_and_approve(first, client, callback)
        rows = await wait_rows(first, lambda rs: rs[0].attempts >= 2 and rs[0].state == "queued")
        assert "ConnectError" in (rows[0].last_error or "")
    # The first process is gone; the receiver comes back; a new process takes over.
    receiver = Receiver()
    with AsgiServer(receiver.app(), port=port):
        async with running_door(fake_slack, fake_feishu, settings) as second:
            [(headers, raw)] = await receiver.wait(1)
            rows = await wait_rows(second, lambda rs: rs[0].state == "done")
    assert headers["webhook-id"] == f"msg_{ref}"
    event = Webhook(client.secret).verify(raw, headers)
    assert event["data"]["ref"] == ref and event["data"]["status"] == "submitted"
    assert rows[0].attempts >= 3 and len(rows) == 1


async def test_retries_keep_one_id_and_the_same_body(door: Door) -> None:
    receiver = Receiver(status=503)
    client = add_client(door.database, "ci", ["ops"])
    async with serve_in_loop(receiver.app()) as url:
        ref = await ask_and_approve(door, client, url + "/hook")
        await receiver.wait(2)
        receiver.status = 200
        await wait_rows(door, lambda rs: rs[0].state == "done")
    bodies = {raw for _, raw in receiver.got}
    ids = {headers["webhook-id"] for headers, _ in receiver.got}
    assert len(receiver.got) >= 3 and len(bodies) == 1 and ids == {f"msg_{ref}"}
    for headers, raw in receiver.got:
        Webhook(client.secret).verify(raw, headers)


async def test_410_gone_stops_the_retries(door: Door) -> None:
    receiver = Receiver(status=410)
    client = add_client(door.database, "ci", ["ops"])
    async with serve_in_loop(receiver.app()) as url:
        await ask_and_approve(door, client, url + "/hook")
        rows = await wait_rows(door, lambda rs: rs[0].state == "failed")
    assert rows[0].attempts == 1 and len(receiver.got) == 1
    with door.database.read() as session:
        events = [a.event for a in session.scalars(select(AuditLog))]
    assert "outbox_failed" in events


async def test_rotation_signs_with_both_secrets_for_a_while(door: Door) -> None:
    receiver = Receiver()
    client = add_client(door.database, "ci", ["ops"])
    new_secret = new_webhook_secret()
    api_clients.rotate_secret(door.database, "ci", SecretBox(SECRET_KEY).seal(new_secret, "ci"))
    async with serve_in_loop(receiver.app()) as url:
        await ask_and_approve(door, client, url + "/hook")
        [(headers, raw)] = await receiver.wait(1)
    assert len(headers["webhook-signature"].split(" ")) == 2
    Webhook(new_secret).verify(raw, headers)
    Webhook(client.secret).verify(raw, headers)
    # After the grace period only the new secret signs.
    door.engine.webhooks.rotation_grace = dt.timedelta(0)
    second = Receiver()
    async with serve_in_loop(second.app()) as url:
        await ask_and_approve(door, client, url + "/hook")
        [(headers, raw)] = await second.wait(1)
    assert len(headers["webhook-signature"].split(" ")) == 1
    Webhook(new_secret).verify(raw, headers)


async def test_revoked_client_gets_no_more_webhooks(door: Door) -> None:
    receiver = Receiver(status=500)
    client = add_client(door.database, "ci", ["ops"])
    async with serve_in_loop(receiver.app()) as url:
        await ask_and_approve(door, client, url + "/hook")
        await receiver.wait(1)
        api_clients.revoke(door.database, "ci")
        receiver.status = 200
        await wait_rows(door, lambda rs: rs[0].state == "done")
        await asyncio.sleep(0.3)
    assert len(receiver.got) == 1  # dropped after the revoke, not delivered


async def test_webhooks_off_without_a_secret_key(tmp_path: Path) -> None:
    import pytest

    from bot.api.problems import Problem
    from bot.api.starter import build_door
    from bot.engine.core import Engine
    from storage import Database
    from tests.api.conftest import make_settings

    settings = make_settings(f"sqlite:///{tmp_path / 'x.db'}")
    database = Database(settings.database_url)
    database.upgrade()
    runtime = build_door(Engine(database, settings), settings, {})
    client = add_client(database, "c", ["ops"])
    with pytest.raises(Problem) as refused:
        await runtime.door.ask(client.info, {"route": "ops", "args": DEPLOY_ARGS,
                                             "callback_url": "http://127.0.0.1:9/hook"})
    assert refused.value.status == 422 and "ASKHUMAN_SECRET_KEY" in refused.value.detail
    database.dispose()


async def test_the_allow_list_is_checked_again_before_each_attempt(door: Door) -> None:
    from bot.api.callbacks import CallbackPolicy
    from bot.api.webhooks import HttpWebhookSender

    receiver = Receiver()
    client = add_client(door.database, "ci", ["ops"])
    sender = door.engine.webhooks.sender
    assert isinstance(sender, HttpWebhookSender)
    async with serve_in_loop(receiver.app()) as url:
        created = await door.create(client, {"route": "ops", "args": DEPLOY_ARGS,
                                             "callback_url": url + "/hook"})
        assert created.status_code == 201
        # The admin narrows the allow-list (or DNS now points somewhere private).
        sender.policy = CallbackPolicy(["localhost"])
        ts = await door.slack.wait_for_card()
        await door.approve_in_slack(ts)
        rows = await wait_rows(door, lambda rs: rs[0].state == "failed")
    assert not receiver.got
    assert "not on the allow-list" in (rows[0].last_error or "")
