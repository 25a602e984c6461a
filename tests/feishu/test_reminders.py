"""Reminders on Feishu: a text reply to the card message through the Open API (fake)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.engine import Engine, Identity, Origin
from bot.platforms.feishu.adapter import FeishuAdapter
from bot.platforms.feishu.client import FeishuApi
from bot.settings import Settings
from storage import Database
from tests.engine.helpers import FakeClock
from tests.feishu.conftest import APPROVALS, BOB, ORIGIN, STARTER, make_config


async def test_reminder_replies_to_the_card_message(tmp_path: Path, fake_api: Any) -> None:
    fake, api_url = fake_api
    url = f"sqlite:///{tmp_path / 'askhuman.db'}"
    settings = Settings.model_validate({
        "database_url": url,
        "agents": {"deploy": {"model": "scripted:deploy", "route": "ops",
                              "starters": {"feishu": {"users": [STARTER]}}}},
        "routes": {"ops": {"timeout": "30m", "reminder": "10m", "max_reminders": 1,
                           "feishu": {"chat_id": APPROVALS, "approvers": {"users": [BOB]}}}},
    })
    database = Database(url)
    database.upgrade()
    clock = FakeClock()
    engine = Engine(database, settings, clock=clock)
    engine.register_adapter(FeishuAdapter(FeishuApi(make_config(api_url, fake.app_id))))
    await engine.start_run("deploy", "Deploy v1", Identity("feishu", STARTER),
                           Origin("feishu", ORIGIN, None))
    [card] = [m for m in fake.messages.values() if m.msg_type == "interactive"]
    clock.advance(10 * 60)
    assert await engine.remind_and_escalate_due() == 1
    clock.advance(10 * 60)
    assert await engine.remind_and_escalate_due() == 0  # max_reminders: 1
    [reply] = [m for m in fake.messages.values() if m.parent_id == card.message_id]
    assert reply.msg_type == "text" and reply.uuid
    assert json.loads(reply.content)["text"] == (
        "Reminder 1: this request from deploy is still waiting for an answer "
        "(due 2025-03-01 12:30 UTC).")
    assert len(fake.calls_to("message.reply")) == 1
    database.dispose()
