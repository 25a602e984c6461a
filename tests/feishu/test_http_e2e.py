"""End to end over HTTP callbacks: message → run → card 2.0 → signed click → toast →
patch after the reply → resumed run → final answer replied in the thread."""

from __future__ import annotations

import json
import time

from sqlalchemy import select

from storage import Run
from tests.fakes.feishu_signing import bot_mention
from tests.feishu.conftest import (
    ALICE,
    APPROVALS,
    BOB,
    CAROL,
    ORIGIN,
    STARTER,
    Feishu,
    card_ref,
    toast_text,
)

ACCEPTED = {"type": "success", "content": "Thanks, your answer (Approve) was recorded.",
            "i18n": {"zh_cn": "谢谢，你的回复（Approve）已记录。",
                     "en_us": "Thanks, your answer (Approve) was recorded."}}


async def test_message_starts_run_and_click_decides(feishu_http: Feishu) -> None:
    f = feishu_http
    origin_message = await f.send_text("@_user_1 deploy: ship v1.2.3")

    card = await f.wait_card()
    create = next(c for c in f.fake.successful("message.create"))
    assert create.query["receive_id_type"] == "chat_id"
    assert create.body["receive_id"] == APPROVALS
    assert create.body["msg_type"] == "interactive"
    assert create.body["uuid"] and len(create.body["uuid"]) <= 50
    assert card.card()["schema"] == "2.0"
    assert await f.status(card) == "pending"

    started = time.monotonic()
    response = await f.post_event(f.click_event(card, operator=ALICE))
    elapsed = time.monotonic() - started
    assert response.status_code == 200
    assert elapsed < 3.0
    body = response.json()
    assert body == {"toast": ACCEPTED}  # toast only; the card is patched afterwards

    patched = await f.wait_patch(card)
    assert patched["schema"] == "2.0"
    assert "form" not in json.dumps(patched["body"])  # decided: no inputs left
    assert await f.status(card) == "submitted"
    patch_call = f.fake.successful("message.patch")[0]
    assert f.clock is not None and f.clock.sent
    # The patch only went out after the callback's HTTP response had been sent.
    click_response_sent = f.clock.sent[-1]
    assert patch_call.at >= click_response_sent
    assert patch_call.path.endswith(card.message_id)

    answer = await f.wait_reply(origin_message)
    assert "Deployed v1.2.3 to production" in answer
    assert "lgtm" in answer


async def test_dm_without_mention_starts_run(feishu_http: Feishu) -> None:
    f = feishu_http
    await f.send_text("deploy: ship v2.0.0", chat_id="oc_p2p_starter", chat_type="p2p",
                      mentions=[])
    card = await f.wait_card()
    assert "v2.0.0" in card.content


async def test_group_message_without_mention_is_ignored(feishu_http: Feishu) -> None:
    f = feishu_http
    await f.send_text("deploy: ship v2.0.0", mentions=[])
    hello = await f.send_text("@_user_1 hello there")
    await f.wait_reply(hello)
    await f.platform.handlers.drain()
    replies = [json.loads(m.content)["text"] for m in f.fake.messages.values() if m.parent_id]
    assert len(replies) == 1 and "<agent>: <what to do>" in replies[0]
    assert not [m for m in f.fake.messages.values() if m.msg_type == "interactive"]


async def test_unknown_agent_is_explained(feishu_http: Feishu) -> None:
    f = feishu_http
    message_id = await f.send_text("@_user_1 nosuch: do it")
    answer = await f.wait_reply(message_id)
    assert "Unknown agent 'nosuch'" in answer


async def test_listed_open_id_and_chat_member_may_answer(feishu_http: Feishu) -> None:
    f = feishu_http
    await f.send_text("@_user_1 deploy: ship v1.0.1")
    card = await f.wait_card()
    await f.click(card, expect="success", operator=BOB, action="reject")
    assert await f.status(card) == "submitted"

    await f.send_text("@_user_1 deploy: ship v1.0.2")
    second = await f.wait_card()
    assert card_ref(second) != card_ref(card)
    await f.click(second, expect="success", operator=CAROL)
    assert await f.status(second) == "submitted"
    assert f.told(BOB) == f.told(CAROL) == []  # their answers were taken: nothing to tell


async def test_self_approval_is_refused(feishu_http: Feishu) -> None:
    f = feishu_http
    await f.send_text("@_user_1 deploy: ship v1.0.3")
    card = await f.wait_card()
    response = await f.click(card, expect="error", operator=STARTER)
    assert "cannot approve it yourself" in toast_text(response)
    assert f.told(STARTER) == []  # said where they clicked, not in another chat
    assert await f.status(card) == "pending"


async def test_url_verification_challenge(feishu_http: Feishu) -> None:
    f = feishu_http
    payload = {"type": "url_verification", "challenge": "c-123",
               "token": "test-verification-token"}
    response = await f.post_event(payload)
    assert response.status_code == 200
    assert response.json() == {"challenge": "c-123"}


async def test_mention_in_the_middle_is_kept_as_name(feishu_http: Feishu) -> None:
    f = feishu_http
    mentions = [bot_mention(), bot_mention("@_user_2", "Dana")]
    await f.send_text("@_user_1 deploy: ship v3.1.0 and tell @_user_2", mentions=mentions)
    card = await f.wait_card()
    assert "v3.1.0" in card.content
    with f.database.transaction() as session:
        run = session.scalars(select(Run)).one()
        assert run.prompt == "ship v3.1.0 and tell @Dana"
        assert (run.origin_platform, run.origin_channel) == ("feishu", ORIGIN)
        assert run.started_by_user == STARTER
