"""The per-client rate limit is global: two replicas on one database (PostgreSQL, or
two processes' worth of engines on one SQLite file) together allow ``rate_limit``
requests per minute, answer 429 problem+json with ``Retry-After`` beyond it, and
let the client in again once the bucket has refilled."""

from __future__ import annotations

import asyncio
import time

import httpx

from tests.api.conftest import Door, add_client, make_settings, running_door
from tests.api.test_refusals import problem
from tests.fakes.feishu_api import FakeFeishuApi
from tests.fakes.slack_api import FakeSlackAPI


async def _get(door: Door, headers: dict[str, str]) -> httpx.Response:
    return await door.http.get(door.api("/requests"), headers=headers)


async def test_two_replicas_together_allow_the_configured_rate(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], db_url: str,
) -> None:
    settings = make_settings(db_url)
    async with running_door(fake_slack, fake_feishu, settings) as a, \
            running_door(fake_slack, fake_feishu, settings) as b:
        client = add_client(a.database, "ci", ["ops"], rate_limit=4)
        answers = [await _get(door, client.headers) for door in (a, b) * 5]
        assert [r.status_code for r in answers] == [200] * 4 + [429] * 6
        for refused in answers[4:]:
            body = problem(refused, 429, "rate-limited")
            assert "4 requests per minute" in body["detail"]
            assert 1 <= int(refused.headers["retry-after"]) <= 15  # a token every 15 s
        # Concurrent callers on both replicas: still no more than the bucket holds.
        other = add_client(a.database, "other", ["ops"], rate_limit=6)
        burst = await asyncio.gather(*(_get(door, other.headers) for door in (a, b) * 8))
        assert sorted(r.status_code for r in burst) == [200] * 6 + [429] * 10


async def test_the_bucket_refills_for_every_replica(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], db_url: str,
) -> None:
    settings = make_settings(db_url)
    async with running_door(fake_slack, fake_feishu, settings) as a, \
            running_door(fake_slack, fake_feishu, settings) as b:
        client = add_client(a.database, "ci", ["ops"], rate_limit=60)  # one a second
        started, codes = time.monotonic(), []
        while 429 not in codes and len(codes) < 200:
            codes.append((await _get((a, b)[len(codes) % 2], client.headers)).status_code)
        refill = (time.monotonic() - started) * 60 / 60
        assert 60 <= codes.count(200) <= 60 + refill + 1, (codes.count(200), refill)
        refused = await _get(b, client.headers)
        assert problem(refused, 429, "rate-limited") and refused.headers["retry-after"] == "1"
        assert (await _get(a, client.headers)).status_code == 429  # empty for both
        await asyncio.sleep(1.05)
        assert (await _get(a, client.headers)).status_code == 200
