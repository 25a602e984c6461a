"""Answer first, and truthfully: every click gets its toast at once, saying the outcome
when it is known by then (a refusal, the answer taken) and "received" only while the
decision is pending; the card shows the outcome to everyone, and a clicker whose
answer was not taken after their toast is told, only them (an ephemeral card in the
group where they clicked, else their chat with the bot)."""

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
    CAROL,
    RECEIVED,
    Feishu,
    _engine,
    served,
    toast_text,
)


def _count(database: Database, model: Any, **where: Any) -> int:
    with database.transaction() as session:
        query = select(func.count()).select_from(model).filter_by(**where)
        return int(session.scalar(query) or 0)


async def test_concurrent_clicks_are_all_answered_truthfully_and_decided_once(
    feishu_http: Feishu,
) -> None:
    f = feishu_http
    await f.send_text("@_user_1 deploy: ship v5.0.0")
    card = await f.wait_card()
    clickers = [ALICE, BOB, CAROL] * 4
    responses = await asyncio.gather(*(
        f.post_event(f.click_event(card, operator=who)) for who in clickers))
    toasts = [r.json()["toast"] for r in responses]
    await f.settle()
    assert await f.status(card) == "submitted"
    assert _count(f.database, AuditLog, event="decided") == 1
    assert _count(f.database, Vote) == 1
    # At most one toast says the answer was taken (if it was decided in time); the
    # others say why not, or "received" while their decision was still pending.
    taken = [t["type"] for t in toasts].count("success")
    assert taken <= 1
    refused = [t for t in toasts if t["type"] == "error"]
    received = [t for t in toasts if t == RECEIVED]
    assert taken + len(refused) + len(received) == len(clickers)
    assert all("Already decided" in t["content"] for t in refused)
    # Every stored click was decided from its row, exactly once; a click refused before
    # it was stored left only its audit row.
    stored = _count(f.database, ClickInbox)
    assert stored == _count(f.database, ClickInbox, state="done") >= 1 + len(received)
    # Whoever read "received" is told afterwards, once: in the group for a member of it
    # (Carol), in their chat with the bot otherwise (the group would not take it).
    told = [text for who in (ALICE, BOB, CAROL) for text in f.told(who) + f.told_here(who)]
    assert len(told) == len(received) - (1 - taken)  # the winner reads the card
    assert all("Already decided" in text for text in told)
    await f.wait_patch(card)


async def test_a_click_left_behind_after_its_toast_is_decided_and_told(
    feishu_http: Feishu, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process dies between the toast and the decision: the worker decides the
    stored click and tells the clicker privately (nothing is lost)."""
    f = feishu_http
    await f.send_text("@_user_1 deploy: ship v5.0.1")
    card = await f.wait_card()

    async def crashed(recorded: Any, until: float) -> None:
        return None  # the live decision never happens

    monkeypatch.setattr(f.platform.handlers.decisions, "decide_now", crashed)
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


async def test_a_non_approver_reads_why_in_the_toast_and_nothing_changes(
    feishu_http: Feishu,
) -> None:
    f = feishu_http
    await f.send_text("@_user_1 deploy: ship v5.0.2")
    card = await f.wait_card()
    refused = await f.click(card, expect="error", operator="ou_mallory")
    assert toast_text(refused) == "You are not allowed to answer this request."
    assert "respond_unauthorized" in f.audit_events()
    assert f.told("ou_mallory") == [] and f.fake.ephemerals == []
    assert await f.status(card) == "pending"
    await f.click(card, expect="success", operator=ALICE)
    assert await f.status(card) == "submitted"


@pytest.fixture
async def feishu_zh(
    tmp_path: Path, fake_api: tuple[FakeFeishuApi, str]
) -> AsyncIterator[Feishu]:
    """The served app with a zh-CN route."""
    engine, database, settings = _engine(tmp_path, locale="zh-CN")
    async with served(fake_api, engine, database, settings) as f:
        yield f


async def test_the_toast_speaks_the_cards_locale(feishu_zh: Feishu) -> None:
    f = feishu_zh
    await f.send_text("@_user_1 deploy: ship v5.0.3")
    card = await f.wait_card()
    response = await f.post_event(f.click_event(card, operator="ou_mallory"))
    assert response.json()["toast"] == {
        "type": "error", "content": "你无权回复此请求。",  # the catalog's words
        "i18n": {"zh_cn": "你无权回复此请求。",
                 "en_us": "You are not allowed to answer this request."}}
    await f.settle()
    assert f.told("ou_mallory") == []


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
    assert response.json()["toast"]["type"] == "error"
    assert response.json()["toast"]["content"] == "无法读取你的回复：form_value is garbled"
    await f.settle()
    assert await f.status(card) == "pending"
    assert "respond_invalid" in f.audit_events()


def _watchers() -> int:
    return sum(1 for task in asyncio.all_tasks()
               if getattr(task.get_coro(), "__qualname__", "") == "AnswersFirst._watch")


async def test_decisions_wait_for_the_burst_with_one_poller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Decisions wait while clicks are being answered, and go once none has been for a
    moment; however many wait, one task polls (the loop answering the burst is not
    woken by every waiter), and a waiter gives up after its patience."""
    from bot.platforms.feishu.handlers import decisions

    answers = decisions.AnswersFirst()
    await asyncio.wait_for(answers.wait(), 0.5)  # nothing answered lately: no wait
    answers.arrived()
    waiters = [asyncio.ensure_future(answers.wait()) for _ in range(50)]
    await asyncio.sleep(0.1)
    assert not any(w.done() for w in waiters)
    assert _watchers() == 1
    answers.answered()
    done, _ = await asyncio.wait(waiters, timeout=0.5)
    assert len(done) == 50 and _watchers() == 0
    monkeypatch.setattr(decisions, "ANSWERS_FIRST_PATIENCE", 0.15)
    answers.arrived()  # never answered: the waiter goes after its patience
    began = asyncio.get_running_loop().time()
    await asyncio.wait_for(answers.wait(), 1.0)
    assert asyncio.get_running_loop().time() - began >= 0.14
