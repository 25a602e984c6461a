"""Feishu with the database down: a run request is answered with an error reply, not
silence, and ``/readyz`` says 503 while ``/healthz`` stays 200 (served app)."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import make_url

from bot.commands.serve_cmd import PlatformRuntime, build_app
from bot.engine import Engine
from bot.engine.health import DATABASE_DOWN
from bot.platforms.feishu import build_feishu_platform
from storage import Database
from tests.fakes.asgi_server import serve_in_loop
from tests.fakes.feishu_api import FakeFeishuApi
from tests.fakes.tcp_proxy import TcpProxy
from tests.feishu.conftest import Feishu, make_config, make_settings, runtimes


@pytest.mark.postgres
async def test_message_gets_an_error_reply_while_postgres_is_down(
    postgres_url: str, fake_api: tuple[FakeFeishuApi, str]
) -> None:
    fake, fake_url = fake_api
    real = make_url(postgres_url)
    with TcpProxy(real.host or "127.0.0.1", real.port or 5432) as proxy:
        url = real.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
        settings = make_settings(url)
        database = Database(url)
        database.upgrade()
        engine = Engine(database, settings, runtimes(settings))
        platform = build_feishu_platform(settings, engine,
                                         config=make_config(fake_url, fake.app_id))
        app = build_app(engine, [PlatformRuntime("feishu", platform.endpoints(),
                                                 platform.background_tasks())])
        try:
            async with serve_in_loop(app) as base, httpx.AsyncClient(timeout=10) as http:
                f = Feishu(fake, engine, database, platform, base, http)
                assert (await http.get(base + "/readyz")).status_code == 200
                proxy.stop()
                ready = await http.get(base + "/readyz")
                assert ready.status_code == 503 and ready.json()["reason"]
                assert (await http.get(base + "/healthz")).status_code == 200
                origin = await f.send_text("@_user_1 deploy: ship v5.0.0")
                assert await f.wait_reply(origin) == str(DATABASE_DOWN)
        finally:
            database.dispose()
