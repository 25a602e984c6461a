"""The Feishu platform closes its API client at shutdown: the call threads end and the
pooled HTTP connections lark-oapi's calls share are closed (``FeishuPlatform.aclose``,
which ``serve`` runs after the engine drained)."""

from __future__ import annotations

import json
from pathlib import Path

from lark_oapi.core.http import transport

from bot.platforms.feishu import build_feishu_platform
from tests.fakes.feishu_api import FakeFeishuApi
from tests.feishu.conftest import APPROVALS, _engine, make_config


def _open_pools() -> int:
    session = transport.requests.session  # the _PooledRequests stand-in
    return sum(len(adapter.poolmanager.pools) for adapter in session.adapters.values())


async def test_aclose_ends_the_threads_and_closes_the_pooled_connections(
    tmp_path: Path, fake_api: tuple[FakeFeishuApi, str]
) -> None:
    fake, fake_url = fake_api
    engine, database, settings = _engine(tmp_path)
    platform = build_feishu_platform(settings, engine, config=make_config(fake_url, fake.app_id))
    await platform.api.send_message("chat_id", APPROVALS, "text",
                                    json.dumps({"text": "hello"}), "uuid-1")
    assert _open_pools() >= 1  # the connection is kept for the next call
    await platform.stop()  # the background task's stop: the client must stay usable
    await platform.api.send_message("chat_id", APPROVALS, "text",
                                    json.dumps({"text": "after stop"}), "uuid-2")
    await platform.aclose()
    assert _open_pools() == 0
    assert platform.api._threads._shutdown
    assert [m.content for m in fake.messages.values() if m.chat_id == APPROVALS] == [
        json.dumps({"text": "hello"}), json.dumps({"text": "after stop"})]
    database.dispose()
