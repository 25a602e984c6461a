"""What Feishu users read: who decided (an ``<at>`` of that one person, never a
broadcast), names instead of raw open_ids in toasts, and delivery failures in words
(the API code stays in the audit), all through the served app."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from storage import AuditLog, HumanRequest
from tests.fakes.feishu_api import FakeFeishuApi
from tests.feishu.conftest import ALICE, BOB, CAROL, Feishu, _engine, served, toast_text

AT = re.compile(r"<at\b[^>]*>", re.IGNORECASE)


def _texts(card: dict[str, Any]) -> str:
    return json.dumps(card["body"], ensure_ascii=False)


async def test_decided_card_mentions_the_decider_only(feishu_http: Feishu) -> None:
    f = feishu_http
    await f.send_text("@_user_1 deploy: ship v4.0.0")
    card = await f.wait_card()
    await f.click(card, operator=ALICE)
    patched = await f.wait_patch(card)
    body = _texts(patched)
    assert AT.findall(body) == [f"<at id={ALICE}>"]  # exactly one mention: the decider
    decision = next(e for e in patched["body"]["elements"] if e.get("tag") == "markdown"
                    and "<at id=" in e["content"])
    assert decision["content"].startswith("Answered&#58; Approve — by <at id=ou_alice></at>")
    assert "id=all" not in body and "@all" not in body.lower()


async def test_already_decided_message_names_the_decider(feishu_http: Feishu) -> None:
    f = feishu_http
    await f.send_text("@_user_1 deploy: ship v4.0.1")
    card = await f.wait_card()
    await f.click(card, expect="success", operator=ALICE)
    late = toast_text(await f.click(card, expect="error", operator=BOB))
    assert late.startswith("Already decided by Alice Chen (Approve) at ")
    assert "ou_" not in late
    # The audit keeps the id (who decided, verifiably), only people read the name.
    with f.database.transaction() as session:
        row = session.scalars(select(HumanRequest)).one()
        assert row.decided_by_user == ALICE


async def test_unknown_name_becomes_neutral_words(feishu_http: Feishu) -> None:
    f = feishu_http
    await f.send_text("@_user_1 deploy: ship v4.0.2")
    card = await f.wait_card()
    await f.click(card, operator=CAROL)
    f.fake.fail_next("user.get", 50, status=500)  # nor can Bob's name be looked up now
    late = toast_text(await f.click(card, expect="error", operator=BOB))
    assert "Already decided by another approver (Approve)" in late
    assert CAROL not in late and "ou_" not in late
    patched = await f.wait_patch(card)
    assert AT.findall(_texts(patched)) == [f"<at id={CAROL}>"]


async def test_names_are_cached(feishu_http: Feishu) -> None:
    f = feishu_http
    await f.send_text("@_user_1 deploy: ship v4.0.3")
    card = await f.wait_card()
    await f.click(card, operator=ALICE)
    told = [toast_text(await f.click(card, expect="error", operator=BOB)) for _ in range(3)]
    assert all("Alice Chen" in late for late in told)
    looked_up = [c.path.rsplit("/", 1)[-1] for c in f.fake.calls_to("user.get")]
    assert sorted(looked_up) == [ALICE, BOB]  # each person once (clickers are named too)


@pytest.fixture
async def feishu_bot_not_in_chat(
    tmp_path: Path, fake_api: tuple[FakeFeishuApi, str]
) -> AsyncIterator[Feishu]:
    """The served app with a route whose chat the bot was never added to (230002)."""
    engine, database, settings = _engine(tmp_path, chat_id="oc_bot_not_member")
    async with served(fake_api, engine, database, settings) as f:
        yield f


async def test_undeliverable_card_is_explained_in_words(feishu_bot_not_in_chat: Feishu) -> None:
    f = feishu_bot_not_in_chat
    origin = await f.send_text("@_user_1 deploy: ship v4.1.0")
    answer = await f.wait_reply(origin)
    assert [c.code for c in f.fake.calls_to("message.create")][:1] == [230002]
    assert "askhuman isn't in that chat; an admin must add the bot to it." in answer
    for raw in ("230002", "code=", "log_id", "status=", "message.create", "NOT be out"):
        assert raw not in answer
    with f.database.transaction() as session:
        request = session.scalars(select(HumanRequest)).one()
        assert request.status == "unavailable"
        message = (request.result or {})["message"]  # what the agent was told
        assert message == ("The request could not be delivered to anyone. "
                           "askhuman isn't in that chat; an admin must add the bot to it.")
        failed = session.scalars(select(AuditLog).where(AuditLog.event == "outbox_failed")).one()
        assert "code=230002" in (failed.reason or "")  # the code stays in the audit
        unavailable = session.scalars(
            select(AuditLog).where(AuditLog.event == "unavailable")).one()
        assert "230002" not in (unavailable.reason or "")


async def test_a_quorum_cards_progress_names_feishu_voters(
    tmp_path: Path, fake_api: tuple[FakeFeishuApi, str]
) -> None:
    """"1 of 2 approvals: Alice Chen (Approve)": the clicker's name (contact API), not
    their open_id, while the request waits for the second vote."""
    engine, database, settings = _engine(tmp_path)
    routes = {"ops": settings.routes["ops"].model_copy(update={"quorum": 2})}
    settings = settings.model_copy(update={"routes": routes})
    engine.apply_settings(settings)
    async with served(fake_api, engine, database, settings) as f:
        await f.send_text("@_user_1 deploy: ship v4.0.4")
        card = await f.wait_card()
        await f.click(card, operator=ALICE)
        patched = _texts(await f.wait_patch(card))
        assert "1 of 2 approvals: Alice Chen (Approve)" in patched
        assert ALICE not in patched.replace(f"<at id={ALICE}>", "")
