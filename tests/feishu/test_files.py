"""File fields: answered by replying in the card's thread with a file, then submitting."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import lark_oapi as lark

from tests.fakes.feishu_signing import bot_mention, message_event
from tests.feishu.conftest import (
    ALICE,
    APPROVALS,
    MALLORY,
    ORIGIN,
    STARTER,
    VERIFICATION_TOKEN,
    Feishu,
)


async def feed(f: Feishu, payload: dict[str, Any]) -> Any:
    return await asyncio.to_thread(f.platform.feed_ws_event, json.dumps(payload).encode())


def file_reply(f: Feishu, sender: str, parent: str, key: str = "file_v2_abc",
               name: str = "report.pdf") -> dict[str, Any]:
    return message_event(
        token=VERIFICATION_TOKEN, sender=sender, chat_id=APPROVALS, chat_type="group",
        file={"file_key": key, "file_name": name}, parent_id=parent, root_id=parent,
        app_id=f.fake.app_id,
    )


async def test_file_reply_is_attached_then_submitted(feishu_ws: Feishu) -> None:
    f = feishu_ws
    start = message_event(token=VERIFICATION_TOKEN, sender=STARTER, chat_id=ORIGIN,
                          text="@_user_1 upload: incident 42", mentions=[bot_mention()],
                          app_id=f.fake.app_id)
    await feed(f, start)
    card = await f.wait_card()
    assert "reply in this card" in card.content

    # A stranger's file is refused (and explained in the thread).
    stranger = file_reply(f, MALLORY, card.message_id, key="file_evil")
    await feed(f, stranger)
    assert "not allowed" in await f.wait_reply(stranger["event"]["message"]["message_id"])

    upload = file_reply(f, ALICE, card.message_id)
    await feed(f, upload)
    confirmation = await f.wait_reply(upload["event"]["message"]["message_id"])
    assert "Attached 1 file" in confirmation
    assert await f.status(card) == "pending"  # decided only when the form is submitted

    response = await feed(f, f.click_event(card, operator=ALICE, action="submit", form_value={}))
    assert json.loads(lark.JSON.marshal(response))["toast"]["type"] in ("success", "info")
    answer = await f.wait_reply(start["event"]["message"]["message_id"])
    got = json.loads(answer.removeprefix("GOT "))
    assert got["values"]["report"] == [{
        "platform": "feishu", "id": "file_v2_abc", "name": "report.pdf",
        "mimetype": "application/pdf", "size": None, "url": None,
    }]


async def test_file_reply_to_unknown_message_is_ignored(feishu_ws: Feishu) -> None:
    f = feishu_ws
    await feed(f, file_reply(f, ALICE, "om_not_a_card"))
    await asyncio.sleep(0.2)
    await f.platform.handlers.drain()
    assert not f.fake.calls_to("message.reply")


async def test_submit_without_required_file_is_refused(feishu_ws: Feishu) -> None:
    f = feishu_ws
    await feed(f, message_event(token=VERIFICATION_TOKEN, sender=STARTER, chat_id=ORIGIN,
                                text="@_user_1 upload: incident 43", mentions=[bot_mention()],
                                app_id=f.fake.app_id))
    card = await f.wait_card()
    response = await feed(f, f.click_event(card, operator=ALICE, action="submit", form_value={}))
    shown = json.loads(lark.JSON.marshal(response))["toast"]
    assert (shown["type"], shown["content"]) == ("error", "“Report” is required")
    await f.settle()
    assert f.told(ALICE) == []
    assert await f.status(card) == "pending"


async def test_resource_download(feishu_ws: Feishu) -> None:
    f = feishu_ws
    f.fake.add_resource("om_1", "file_k", b"%PDF-1.7", "report.pdf")
    resource = await f.platform.api.get_resource("om_1", "file_k", "file")
    assert resource.content == b"%PDF-1.7"
    assert resource.file_name == "report.pdf"
