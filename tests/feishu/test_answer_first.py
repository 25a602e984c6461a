"""Answer first, decide after: every stored click gets the "received" toast at once; the
engine decides from the stored click, the card shows the outcome to everyone, and a
clicker whose answer was not taken is told privately (their chat with the bot)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from storage import AuditLog, ClickInbox, Database, Vote
from tests.fakes.feishu_api import FakeFeishuApi
from tests.feishu.conftest import (
    ALICE,
    BOB,
    BOTH_LANGUAGES,
    CAROL,
    RECEIVED,
    Feishu,
    _engine,
    served,
)


def _count(database: Database, model: Any, **where: Any) -> int:
    with database.transaction() as session:
        query = select(func.count()).select_from(model).filter_by(**where)
        return int(session.scalar(query) or 0)


async def test_concurrent_clicks_are_all_received_and_decided_once(feishu_http: Feishu) -> None:
    f = feishu_http
    await f.send_text("@_user_1 deploy: ship v5.0.0")
    card = await f.wait_card()
    clickers = [ALICE, BOB, CAROL] * 4
    responses = await asyncio.gather(*(
        f.post_event(f.click_event(card, operator=who)) for who in clickers))
    assert [r.json() for r in responses] == [{"toast": RECEIVED}] * len(clickers)
    await f.settle()
    assert await f.status(card) == "submitted"
    assert _count(f.database, AuditLog, event="decided") == 1
    assert _count(f.database, Vote) == 1
    # Every stored click was decided from its row, exactly once.
    assert _count(f.database, ClickInbox) == len(clickers)
    assert _count(f.database, ClickInbox, state="done") == len(clickers)
    # All but the winning click are told why privately; the winner reads the card.
    told = {who: f.told(who) for who in (ALICE, BOB, CAROL)}
    assert sum(len(texts) for texts in told.values()) == len(clickers) - 1
    assert all("Already decided" in text for texts in told.values() for text in texts)
    await f.wait_patch(card)


async def test_a_click_left_behind_after_its_toast_is_decided_and_told(
    feishu_http: Feishu, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process dies between the toast and the decision: the worker decides the
    stored click and tells the clicker privately (nothing is lost)."""
    f = feishu_http
    await f.send_text("@_user_1 deploy: ship v5.0.1")
    card = await f.wait_card()

    async def crashed(recorded: Any) -> None:
        return None  # the live decision never happens

    monkeypatch.setattr(f.platform.handlers.decisions, "decide_later", crashed)
    f.engine.tuning.click_lease = dt.timedelta(milliseconds=50)
    response = await f.post_event(f.click_event(card, operator=ALICE))
    assert response.json() == {"toast": RECEIVED}
    assert await f.status(card) == "pending"
    await asyncio.sleep(0.1)  # the lease of the dead process runs out
    assert await f.engine.recover_clicks() == 1
    assert await f.status(card) == "submitted"
    [told] = f.told(ALICE)
    assert told == ("About your answer on an askhuman card: Thanks, your answer (Approve) "
                    "was recorded.")


async def test_a_failed_private_message_loses_nothing(feishu_http: Feishu) -> None:
    """Feishu refusing the DM is logged; the refusal itself is decided and audited."""
    f = feishu_http
    await f.send_text("@_user_1 deploy: ship v5.0.2")
    card = await f.wait_card()
    f.fake.fail_next("message.create", 3, status=500)
    await f.click(card, operator="ou_mallory")
    assert "respond_unauthorized" in f.audit_events()
    assert await f.status(card) == "pending"
    await f.click(card, operator=ALICE)
    assert await f.status(card) == "submitted"


@pytest.fixture
async def feishu_zh(
    tmp_path: Path, fake_api: tuple[FakeFeishuApi, str]
) -> AsyncIterator[Feishu]:
    """The served app with a zh-CN route."""
    engine, database, settings = _engine(tmp_path, locale="zh-CN")
    async with served(fake_api, engine, database, settings) as f:
        yield f


async def test_toast_and_private_message_speak_the_route_locale(feishu_zh: Feishu) -> None:
    f = feishu_zh
    await f.send_text("@_user_1 deploy: ship v5.0.3")
    card = await f.wait_card()
    response = await f.post_event(f.click_event(card, operator="ou_mallory"))
    assert response.json()["toast"] == {"type": "info",
                                        "content": "已收到，正在记录你的回复。卡片会显示结果。",
                                        "i18n": BOTH_LANGUAGES}
    await f.settle()
    [told] = f.told("ou_mallory")
    assert told == "关于你在 askhuman 卡片上的回复：你无权回复此请求。"  # the catalog's words


async def test_a_zh_cn_clicker_reads_why_their_answer_could_not_be_read(
    feishu_zh: Feishu, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refusal the engine words with a parameter (the reason an answer could not be
    read) reaches a zh-CN clicker in Chinese, the parameter as it was."""
    f = feishu_zh
    await f.send_text("@_user_1 deploy: ship v5.0.4")
    card = await f.wait_card()

    def garbled(*_args: Any) -> Any:
        raise ValueError("form_value is garbled")

    monkeypatch.setattr(f.platform.adapter, "read_click", garbled)
    response = await f.post_event(f.click_event(card, operator=ALICE))
    assert response.json()["toast"]["content"] == "已收到，正在记录你的回复。卡片会显示结果。"
    await f.settle()
    assert await f.status(card) == "pending"
    [told] = f.told(ALICE)
    assert told == "关于你在 askhuman 卡片上的回复：无法读取你的回复：form_value is garbled"
