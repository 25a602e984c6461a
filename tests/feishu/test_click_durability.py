"""A Feishu click is stored before its toast (the toast is the acknowledgement): a
"received" or success toast only for a stored click, an error toast when it could not
be stored."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bot.engine.clicks import NOT_RECORDED
from bot.platforms.feishu.handlers import WORKING
from storage import ClickInbox, Database
from tests.fakes.sqlite_lock import hold_write_lock
from tests.feishu.conftest import ALICE, RECEIVED, Feishu
from tests.feishu.test_ws import feed, start_run, toast_of


def _inbox(database: Database) -> list[tuple[str, str | None]]:
    with database.transaction() as s:
        return [(r.state, r.outcome) for r in s.scalars(select(ClickInbox).order_by(ClickInbox.id))]


async def test_the_toast_comes_after_the_click_is_stored(feishu_http: Feishu) -> None:
    f = feishu_http
    await f.send_text("@_user_1 deploy: ship v1.2.3")
    card = await f.wait_card()
    release = asyncio.Event()
    decide = f.engine.decide_click

    async def slow_decision(recorded: Any, **kw: Any) -> Any:
        await release.wait()  # slower than the inline budget
        return await decide(recorded, **kw)

    f.engine.decide_click = slow_decision  # type: ignore[method-assign]
    started = time.monotonic()
    response = await f.post_event(f.click_event(card, operator=ALICE))
    assert response.status_code == 200 and time.monotonic() - started < 3.0
    toast = response.json()["toast"]
    assert (toast["type"], toast["content"]) == ("info", WORKING)
    assert _inbox(f.database) == [("running", None)]  # "received" only once stored
    release.set()
    await f.wait_patch(card)
    assert await f.status(card) == "submitted"
    assert _inbox(f.database) == [("done", "accepted")]


async def test_a_success_toast_means_a_stored_click_decided_once(feishu_http: Feishu) -> None:
    f = feishu_http
    await f.send_text("@_user_1 deploy: ship v1.2.3")
    card = await f.wait_card()
    response = await f.post_event(f.click_event(card, operator=ALICE))
    toast = response.json()["toast"]
    assert (toast["type"], toast["content"]) == (
        "success", "Thanks, your answer (Approve) was recorded.")
    assert _inbox(f.database) == [("done", "accepted")]  # stored and decided, then told
    await f.platform.handlers.drain()
    assert _inbox(f.database) == [("done", "accepted")]
    assert await f.status(card) == "submitted"



async def test_a_click_the_database_cannot_store_in_time_gets_an_error_toast(
    feishu_ws: Feishu,
) -> None:
    f = feishu_ws
    await start_run(f)
    card = await f.wait_card()
    held = threading.Event()
    path = Path(f.database.url.removeprefix("sqlite:///"))
    locker = threading.Thread(target=hold_write_lock, args=(path, 4.0, held))
    locker.start()
    held.wait(5)
    started = time.monotonic()
    response = await feed(f, f.click_event(card, operator=ALICE))
    assert time.monotonic() - started < 3.0
    shown = toast_of(response)
    assert (shown["type"], shown["content"]) == ("error", str(NOT_RECORDED))
    assert shown["i18n"]["zh_cn"].startswith("暂时无法记录你的回复")
    await asyncio.to_thread(locker.join)
    await asyncio.sleep(0.5)
    await f.engine.drain()
    await f.engine.recover_clicks()
    assert await f.status(card) == "pending"  # nothing decides from the refused click
    assert all(state == "failed" for state, _ in _inbox(f.database))
    # Clicking again, as the toast asks, works.
    again = await feed(f, f.click_event(card, operator=ALICE))
    assert toast_of(again)["type"] in ("success", "info")
    assert toast_of(again)["type"] == "success" or toast_of(again) == RECEIVED
    await f.platform.handlers.drain()
    assert await f.status(card) == "submitted"
