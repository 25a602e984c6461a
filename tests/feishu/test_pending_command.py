"""Feishu ``/pending``: the open requests the sender may answer, as a reply."""

from __future__ import annotations

import json

from bot.platforms.feishu.pending import pending_command
from tests.feishu.conftest import BOB, Feishu

MALLORY = "ou_mallory"


async def test_pending_lists_what_the_sender_may_answer(
    feishu_http: Feishu,
) -> None:
    f = feishu_http
    await f.send_text("@_user_1 deploy: ship v3.1.0")
    await f.wait_card()
    asked = await f.send_text("/pending", user=BOB, chat_id="oc_p2p_bob", chat_type="p2p",
                              mentions=[])
    await f.settle()
    [listed] = [m for m in list(f.fake.messages.values())
                if m.parent_id == asked and m.msg_type == "interactive"]
    reply = json.dumps(listed.card(), ensure_ascii=False)  # the list card (docs/batch.md)
    assert "1 open request(s) you may answer" in reply and "v3.1.0" in reply
    assert "agent deploy" in reply and "due " in reply
    nobody = await f.send_text("@_user_1 /pending", user=MALLORY)
    assert await f.wait_reply(nobody) == "Nothing is waiting for you."


def test_pending_command_words() -> None:
    assert pending_command("/pending") == 1 and pending_command(" pending 3 ") == 3
    assert pending_command("@_user_1 /pending") is None  # mentions are stripped first
    assert pending_command("pending: deploy it") is None  # an agent named "pending"
