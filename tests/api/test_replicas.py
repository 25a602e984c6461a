"""Two replicas on PostgreSQL: a long-poll on A is woken by a decision made on B
(LISTEN/NOTIFY sent in the decision's own transaction), well under 100 ms."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from sqlalchemy.orm import Session

from bot.engine import waiters
from tests.api.conftest import DEPLOY_ARGS, add_client, make_settings, running_door
from tests.fakes.feishu_api import FakeFeishuApi
from tests.fakes.slack_api import FakeSlackAPI

pytestmark = pytest.mark.postgres


async def test_waiter_on_a_is_woken_by_a_decision_on_b(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], postgres_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    committed: list[tuple[float, list[str]]] = []
    original = waiters.taken

    def spy(session: Session, postgres: bool) -> list[str]:
        refs = original(session, postgres)
        if refs:
            committed.append((time.perf_counter(), refs))
        return refs

    monkeypatch.setattr(waiters, "taken", spy)
    settings = make_settings(postgres_url)
    async with running_door(fake_slack, fake_feishu, settings) as a, \
            running_door(fake_slack, fake_feishu, settings) as b:
        client = add_client(a.database, "ci", ["ops"])
        latencies = []
        for _ in range(3):
            created = await a.create(client, {"route": "ops", "args": DEPLOY_ARGS})
            ref = created.json()["ref"]
            ts = await _new_card(a, ref)
            poll = asyncio.create_task(a.get(client, ref, wait=30))
            await asyncio.sleep(0.3)  # A is waiting; B has never seen this waiter
            assert not poll.done()
            await b.approve_in_slack(ts)  # the click reaches replica B only
            response = await asyncio.wait_for(poll, 5)
            woke = time.perf_counter()
            assert response.json()["status"] == "submitted"
            [(decided, _refs)] = [c for c in committed if ref in c[1]]
            latencies.append(woke - decided)
        assert a.engine.waiters.count() == 0
    print("wake latencies (s):", [round(x, 4) for x in latencies])
    assert max(latencies) < 0.1, latencies


async def _new_card(system: Any, ref: str) -> str:
    """The ts of the Slack card for ``ref``."""
    for _ in range(500):
        for message in list(system.slack.fake.messages.values()):
            if message.blocks and ref in str(message.blocks):
                return str(message.ts)
        await asyncio.sleep(0.02)
    raise AssertionError(f"no card for {ref}")
