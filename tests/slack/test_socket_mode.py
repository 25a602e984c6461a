"""Socket Mode: ``serve``'s lifespan opens the websocket; envelopes are acked and handled."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx

from bot.commands.serve_cmd import build_app, start_platforms
from bot.engine.core import Engine
from storage import Database
from tests.fakes.asgi_server import serve_in_loop
from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, TEAM_ID, FakeSlackAPI
from tests.slack.conftest import ALICE, ORIGIN, STARTER, Slack, make_settings


async def _wait(predicate, what: str, timeout: float = 10) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def test_socket_mode_command_and_click(fake_slack: FakeSlackAPI, tmp_path: Path) -> None:
    fake_slack.enable_socket_mode()
    settings = make_settings(f"sqlite:///{tmp_path / 'sm.db'}")
    database = Database(settings.database_url)
    database.upgrade()
    engine = Engine(database, settings)
    env = {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_APP_TOKEN": APP_TOKEN,
        "SLACK_API_URL": fake_slack.base_url,
    }
    runtimes = start_platforms(engine, settings, env)
    assert runtimes[0].endpoints == []  # nothing mounted: Slack connects no URL to us
    async with serve_in_loop(build_app(engine, runtimes)) as url:
        async with httpx.AsyncClient() as http:
            refused = await http.post(url + "/slack/events", content=b"{}")
            assert refused.status_code in (404, 405)
        await _wait(lambda: fake_slack.socket_connected, "socket connection")
        fake_slack.push(
            {
                "envelope_id": "env-1",
                "type": "slash_commands",
                "accepts_response_payload": True,
                "payload": {
                    "command": "/askhuman",
                    "text": "run deploy ship v7.0.0",
                    "user_id": STARTER,
                    "user_name": "starter",
                    "channel_id": ORIGIN,
                    "team_id": TEAM_ID,
                    "response_url": fake_slack.response_url("sm"),
                },
            }
        )
        await _wait(
            lambda: any(a.get("envelope_id") == "env-1" for a in fake_slack.socket_acks),
            "command ack",
        )
        helper = Slack(
            url=url, fake=fake_slack, engine=engine, database=database, http=httpx.AsyncClient()
        )
        ts = await helper.wait_for_card()
        fake_slack.push(
            {
                "envelope_id": "env-2",
                "type": "interactive",
                "accepts_response_payload": False,
                "payload": helper.click_payload(ts, "Approve", ALICE),
            }
        )
        await _wait(
            lambda: any(a.get("envelope_id") == "env-2" for a in fake_slack.socket_acks),
            "click ack",
        )
        await _wait(lambda: fake_slack.calls_to("chat.update"), "chat.update")
        assert helper.request_row().status == "submitted"
        await helper.http.aclose()
    assert fake_slack.calls_to("apps.connections.open")
    database.dispose()
