"""Batch decisions on Feishu, end to end over the HTTP callback (loopback fake): the
``pending`` list card with checkers, "批准所选" deciding each item as a lone click,
the toast and the patched list saying what happened, in Chinese, every card patched."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.engine import Engine
from bot.settings import Settings
from storage import AuditLog, Database, HumanRequest
from tests.engine.batch_rows import api_client, ask_form, ask_tool
from tests.fakes.feishu_api import FakeFeishuApi, Message
from tests.fakes.feishu_signing import card_action_event
from tests.feishu.conftest import (
    ALICE,
    ALICE_EMAIL,
    APPROVALS,
    BOB,
    VERIFICATION_TOKEN,
    Feishu,
    runtimes,
    served,
)

OTHER_CHAT = "oc_other"
P2P = "oc_p2p_alice"


def settings_for(db_url: str) -> Settings:
    return Settings.model_validate({
        "database_url": db_url,
        "agents": {"deploy": {"model": "scripted:deploy", "route": "ops"}},
        "routes": {
            "ops": {"timeout": "30m", "locale": "zh-CN", "require_reason": ["reject"],
                    "feishu": {"chat_id": APPROVALS,
                               "approvers": {"users": [ALICE_EMAIL, BOB]}}},
            "other": {"timeout": "30m", "locale": "zh-CN",
                      "feishu": {"chat_id": OTHER_CHAT, "approvers": {"users": ["ou_zed"]}}},
        },
    })


@pytest.fixture
async def feishu(tmp_path: Path, fake_api: tuple[FakeFeishuApi, str], db_url: str
                 ) -> AsyncIterator[Feishu]:
    fake_api[0].chats[OTHER_CHAT] = ["ou_zed"]
    fake_api[0].chats[P2P] = [ALICE]
    settings = settings_for(db_url)
    database = Database(db_url)
    database.upgrade()
    engine = Engine(database, settings, runtimes(settings))
    async with served(fake_api, engine, database, settings) as system:
        yield system


async def list_card(f: Feishu) -> Message:
    asked = await f.send_text("/pending", user=ALICE, chat_id=P2P, chat_type="p2p",
                              mentions=[])
    await f.settle()
    for message in list(f.fake.messages.values()):
        if message.parent_id == asked and message.msg_type == "interactive":
            return message
    raise AssertionError("no list card was replied")


def checkers(card: dict[str, Any]) -> list[str]:
    """The refs offered with a checker, in order (the buttons carry them)."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("tag") == "button" and not found:
                found.extend(node["behaviors"][0]["value"]["refs"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(card)
    return found


async def batch(f: Feishu, listed: Message, verb: str, refs: list[str],
                ticked: list[str], reason: str | None = None) -> dict[str, Any]:
    form: dict[str, Any] = {f"c_{i}": ref in ticked for i, ref in enumerate(refs)}
    if reason is not None:
        form["reason"] = reason
    event = card_action_event(token=VERIFICATION_TOKEN, operator=ALICE,
                              value={"batch": verb, "refs": refs}, form_value=form,
                              message_id=listed.message_id, chat_id=P2P,
                              app_id=f.fake.app_id, button_name=f"batch_{verb}")
    response = await f.post_event(event)
    assert response.status_code == 200, response.text
    await f.settle()
    return dict(response.json()["toast"])


def row(database: Database, ref: str) -> HumanRequest:
    with database.transaction() as session:
        found = session.scalars(select(HumanRequest).where(HumanRequest.ref == ref)).one()
        session.expunge(found)
        return found


def card_for(f: Feishu, ref: str) -> Message:
    for message in list(f.fake.messages.values()):
        if message.msg_type == "interactive" and ref in message.sent_content:
            return message
    raise AssertionError(f"no card for {ref}")


async def test_pending_card_and_batch_approve_in_chinese(feishu: Feishu) -> None:
    f, engine = feishu, feishu.engine
    client = api_client(engine, ["ops", "other"])
    refs = [await ask_tool(engine, client, "ops", f"restart_{i}") for i in range(3)]
    form = await ask_form(engine, client, "ops", "发布 v2")
    theirs = await ask_tool(engine, client, "other", "theirs")
    needs_card = await ask_form(engine, client, "ops", "选环境", required_field=True)
    for _ in range(6):
        await f.wait_card(APPROVALS if _ < 5 else OTHER_CHAT)
    listed = await list_card(f)
    card = listed.card()
    offered = checkers(card)
    assert offered == [*refs, form]  # not another route's, not one that needs its form
    text = json.dumps(card, ensure_ascii=False)
    assert "你可以处理的请求共 5 个" in text and "路由 ops" in text and "批准所选" in text
    assert "选环境 (" in text and "（请在它的卡片上回复）" in text and needs_card not in offered

    await f.click(card_for(f, refs[0]), operator=BOB, form_value={})  # Bob is first
    assert row(f.database, refs[0]).decided_by_user == BOB

    toast = await batch(f, listed, "approve", [*offered, theirs], [*offered, theirs])
    assert toast["type"] == "error"  # some were not recorded: the toast says so
    assert toast["content"].startswith("已批准 3 个。未记录：")
    assert "已" in toast["content"] and "theirs" in toast["content"]
    for ref in [refs[1], refs[2], form]:
        assert row(f.database, ref).status == "submitted"
        assert row(f.database, ref).decided_by_user == ALICE
        patched = await f.wait_patch(card_for(f, ref))
        assert f"<at id={ALICE}></at>" in json.dumps(patched, ensure_ascii=False)  # decided
    assert row(f.database, theirs).status == "pending"
    # The list card itself is patched: the answer on top, what is left below.
    patched_list = await f.wait_patch(listed)
    shown = json.dumps(patched_list, ensure_ascii=False)
    assert "已批准 3 个" in shown and checkers(patched_list) == []
    with f.database.transaction() as session:
        [summary] = session.scalars(select(AuditLog).where(AuditLog.event == "batch_decided"))
        assert sorted(summary.details["decided"]) == sorted([refs[1], refs[2], form])


async def test_reject_selected_with_a_reason_and_without(feishu: Feishu) -> None:
    f, engine = feishu, feishu.engine
    client = api_client(engine, ["ops"])
    refs = [await ask_tool(engine, client, "ops", f"scale_{i}") for i in range(2)]
    for _ in refs:
        await f.wait_card()
    listed = await list_card(f)
    toast = await batch(f, listed, "reject", refs, refs)
    assert toast["content"].startswith("已拒绝 0 个。未记录：")
    assert "需要填写理由" in toast["content"]
    toast = await batch(f, listed, "reject", refs, refs, reason="冻结期")
    assert toast == {**toast, "type": "success"} and toast["content"] == "已拒绝 2 个。"
    for ref in refs:
        assert row(f.database, ref).result["values"]["reason"] == "冻结期"


async def test_nothing_ticked_is_refused_in_the_toast(feishu: Feishu) -> None:
    f, engine = feishu, feishu.engine
    ref = await ask_tool(engine, api_client(engine, ["ops"]), "ops", "one")
    await f.wait_card()
    listed = await list_card(f)
    toast = await batch(f, listed, "approve", [ref], [])
    assert toast["type"] == "error" and "请先勾选" in toast["content"]
    assert row(f.database, ref).status == "pending"


async def test_a_batch_not_decided_inline_says_received_and_the_list_tells_after(
        feishu: Feishu, monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.platforms.feishu.handlers import batch as handler

    monkeypatch.setattr(handler, "INLINE_SECONDS", 0.0)  # the decisions miss the toast
    f, engine = feishu, feishu.engine
    client = api_client(engine, ["ops"])
    refs = [await ask_tool(engine, client, "ops", f"slow_{i}") for i in range(2)]
    for _ in refs:
        await f.wait_card()
    listed = await list_card(f)
    toast = await batch(f, listed, "approve", refs, refs)
    assert toast["type"] == "info" and toast["content"].startswith("已收到 2 个")  # no claim
    assert "已批准 2 个" in json.dumps(await f.wait_patch(listed), ensure_ascii=False)
    assert [row(f.database, r).status for r in refs] == ["submitted", "submitted"]


async def test_the_long_connection_answers_a_batch_too(feishu_ws: Feishu) -> None:
    from tests.feishu.test_ws import feed, toast_of

    f, engine = feishu_ws, feishu_ws.engine
    ref = await ask_tool(engine, api_client(engine, ["ops"]), "ops", "over_ws")
    card = await f.wait_card()
    event = card_action_event(token=VERIFICATION_TOKEN, operator=ALICE,
                              value={"batch": "approve", "refs": [ref]},
                              form_value={"c_0": True}, message_id="om_list",
                              chat_id=P2P, app_id=f.fake.app_id, button_name="batch_approve")
    toast = toast_of(await feed(f, event))
    assert (toast["type"], toast["content"][:10]) in (
        ("success", "Approved 1"), ("info", "Received 1")), toast  # a busy machine: honest
    await f.wait_patch(card)
    assert row(f.database, ref).decided_by_user == ALICE
