"""Long-connection path: the same dispatcher and handlers, fed with raw event bytes.

``lark.ws.Client`` hands each event frame's payload to
``EventDispatcherHandler._do_without_validation``; we do exactly that (from a worker
thread, as the client's own thread would) instead of opening a websocket.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import lark_oapi as lark

from bot.platforms.feishu.ws import LongConnection
from tests.fakes.feishu_signing import bot_mention, message_event
from tests.feishu.conftest import (
    ALICE,
    MALLORY,
    ORIGIN,
    STARTER,
    VERIFICATION_TOKEN,
    Feishu,
    make_config,
)


async def feed(f: Feishu, payload: dict[str, Any]) -> Any:
    raw = json.dumps(payload).encode()
    return await asyncio.to_thread(f.platform.feed_ws_event, raw)


def toast_of(response: Any) -> dict[str, Any]:
    """The toast as Feishu gets it (with its ``i18n`` translations, when it has any)."""
    data = json.loads(lark.JSON.marshal(response))
    return dict(data.get("toast") or {})


async def start_run(f: Feishu, text: str = "@_user_1 deploy: ship v4.0.0") -> str:
    event = message_event(token=VERIFICATION_TOKEN, sender=STARTER, chat_id=ORIGIN, text=text,
                          mentions=[bot_mention()], app_id=f.fake.app_id)
    assert await feed(f, event) is None
    return str(event["event"]["message"]["message_id"])


async def test_ws_flow_end_to_end(feishu_ws: Feishu) -> None:
    f = feishu_ws
    origin_message = await start_run(f)
    card = await f.wait_card()

    refused = await feed(f, f.click_event(card, operator=MALLORY))
    assert toast_of(refused)["type"] == "error"
    assert "not allowed" in toast_of(refused)["content"]
    await f.settle()
    assert f.told(MALLORY) == []
    assert await f.status(card) == "pending"

    response = await feed(f, f.click_event(card, operator=ALICE))
    # Taken: decided before the toast ("success"), or stored and decided right after it
    # when the decision missed the 150 ms inline budget (a loaded machine): "received".
    assert toast_of(response)["type"] in ("success", "info"), toast_of(response)
    patched = await f.wait_patch(card)
    assert patched["schema"] == "2.0"
    answer = await f.wait_reply(origin_message)
    assert "Deployed v4.0.0 to production" in answer


async def test_ws_duplicate_event_is_ignored(feishu_ws: Feishu) -> None:
    f = feishu_ws
    await start_run(f)
    card = await f.wait_card()
    event = f.click_event(card, operator=MALLORY)
    assert toast_of(await feed(f, event))["type"] == "error"
    # Redelivery of the same event (same event_id), e.g. after a reconnect.
    assert toast_of(await feed(f, event)) == {}
    await f.settle()
    assert await f.status(card) == "pending"
    assert f.audit_events().count("respond_unauthorized") == 1


async def test_ws_duplicate_message_starts_one_run(feishu_ws: Feishu) -> None:
    f = feishu_ws
    event = message_event(token=VERIFICATION_TOKEN, sender=STARTER, chat_id=ORIGIN,
                          text="@_user_1 deploy: ship v4.0.1", mentions=[bot_mention()],
                          app_id=f.fake.app_id)
    await feed(f, event)
    await feed(f, event)
    await f.wait_card()
    await asyncio.sleep(0.2)
    await f.platform.handlers.drain()
    cards = [m for m in f.fake.messages.values() if m.msg_type == "interactive"]
    assert len(cards) == 1


async def test_ws_messages_from_bots_are_ignored(feishu_ws: Feishu) -> None:
    f = feishu_ws
    event = message_event(token=VERIFICATION_TOKEN, sender="ou_other_bot", chat_id=ORIGIN,
                          text="@_user_1 deploy: ship v4.0.2", mentions=[bot_mention()],
                          app_id=f.fake.app_id, sender_type="app")
    await feed(f, event)
    await asyncio.sleep(0.2)
    assert not f.fake.messages


async def test_long_connection_runs_on_its_own_loop(fake_api: Any) -> None:
    """The ws client gets a fresh loop in its own thread; ours keeps running."""
    import lark_oapi.ws.client as ws_client

    fake, url = fake_api
    main_loop = asyncio.get_running_loop()
    seen: dict[str, Any] = {}
    original_start = lark.ws.Client.start

    def fake_start(self: Any) -> None:  # what start() would use, without a network
        seen["loop"] = ws_client.loop
        seen["thread"] = threading.current_thread().name
        ws_client.loop.run_until_complete(asyncio.sleep(0))

    lark.ws.Client.start = fake_start
    try:
        connection = LongConnection(make_config(url, fake.app_id, mode="ws"), dispatcher=None)
        connection.start()
        for _ in range(100):
            if "loop" in seen:
                break
            await asyncio.sleep(0.01)
    finally:
        lark.ws.Client.start = original_start
    assert seen["loop"] is not main_loop
    assert seen["thread"] == "feishu-ws"
    connection.stop()
