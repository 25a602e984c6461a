"""A Feishu message that starts a run gets its HTTP 200 only once the start is stored:
a crash right after the 200 loses nothing, and the worker starts it exactly once."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import func, select, update

from storage import HumanRequest, Run, RunStart
from tests.feishu.conftest import Feishu


def _count(f: Feishu, model: Any) -> int:
    with f.database.transaction() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


def _starts(f: Feishu) -> list[tuple[str, str | None]]:
    with f.database.transaction() as s:
        return [(r.state, r.outcome) for r in s.scalars(select(RunStart))]


async def test_the_200_comes_after_the_start_is_stored(feishu_http: Feishu) -> None:
    f = feishu_http
    live_run_start = f.engine.run_start

    async def die(*_args: Any, **_kwargs: Any) -> Any:  # the process dies after the 200
        await asyncio.sleep(3600)

    f.engine.run_start = die
    await f.send_text("@_user_1 deploy: ship v3.0.0")  # asserts the 200
    assert _starts(f) == [("running", None)]  # durable before Feishu had its answer
    assert _count(f, Run) == 0

    f.engine.run_start = live_run_start
    with f.database.transaction() as s:  # the dead holder's lease runs out
        s.execute(update(RunStart).values(lease_until=RunStart.created_at))
    assert await f.engine.recover_starts() == 1
    card = await f.wait_card()
    assert "v3.0.0" in card.content
    assert _starts(f) == [("done", "started")]
    assert await f.engine.recover_starts() == 0
    assert _count(f, Run) == 1 and _count(f, HumanRequest) == 1


async def test_a_refused_start_is_replied_and_nothing_is_stored(feishu_http: Feishu) -> None:
    f = feishu_http
    message = await f.send_text("@_user_1 deploy: ship v3.0.0", user="ou_stranger")
    reply = await f.wait_reply(message)
    assert "not allowed to start 'deploy'" in reply
    assert _starts(f) == [] and _count(f, Run) == 0
