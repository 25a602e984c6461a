"""Reminders on Slack: posted in the card's thread through the Web API (fake)."""

from __future__ import annotations

from pathlib import Path

from bot.engine import Engine, Identity, Origin
from bot.engine.ports import DeliveryRef
from bot.platforms.slack.adapter import SlackAdapter
from bot.platforms.slack.client import make_client
from bot.platforms.slack.config import SlackConfig
from bot.platforms.slack.directory import SlackDirectory
from bot.settings import Settings
from storage import Database
from tests.engine.helpers import FakeClock
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackAPI
from tests.slack.conftest import ALICE, APPROVALS, ORIGIN, STARTER
from tests.slack.test_adapter_cards import sample_card


async def test_reminder_is_posted_in_the_card_thread(
    tmp_path: Path, fake_slack: FakeSlackAPI
) -> None:
    url = f"sqlite:///{tmp_path / 'askhuman.db'}"
    settings = Settings.model_validate({
        "database_url": url,
        "agents": {"deploy": {"model": "scripted:deploy", "route": "ops",
                              "starters": {"slack": {"users": [STARTER]}}}},
        "routes": {"ops": {"timeout": "30m", "reminder": "10m", "slack": {
            "channel": APPROVALS, "approvers": {"users": [ALICE]}}}},
    })
    database = Database(url)
    database.upgrade()
    clock = FakeClock()
    engine = Engine(database, settings, clock=clock)
    client = make_client(SlackConfig(bot_token=BOT_TOKEN, signing_secret="s",
                                     api_url=fake_slack.base_url))
    engine.register_adapter(SlackAdapter(client), SlackDirectory(client))
    await engine.start_run("deploy", "Deploy v1", Identity("slack", STARTER),
                           Origin("slack", ORIGIN, None))
    [card] = [m for m in fake_slack.messages.values() if m.channel == APPROVALS and m.blocks]
    clock.advance(10 * 60)
    assert await engine.remind_and_escalate_due() == 1
    [reminder] = fake_slack.thread_replies(APPROVALS, card.ts)
    assert reminder.text == ("Reminder 1: this request from deploy is still waiting for an "
                             "answer (due 2025-03-01 12:30 UTC).")
    body = fake_slack.calls_to("chat.postMessage")[-1].body
    assert body["thread_ts"] == card.ts and body["channel"] == APPROVALS
    await client.aclose()
    database.dispose()


async def test_reminder_text_is_escaped(fake_slack: FakeSlackAPI) -> None:
    client = make_client(SlackConfig(bot_token=BOT_TOKEN, signing_secret="s",
                                     api_url=fake_slack.base_url))
    await SlackAdapter(client).remind(sample_card(), DeliveryRef("slack", "C1", "1.5"),
                                      "Reminder <!channel> & <@U1>")
    await client.aclose()
    body = fake_slack.calls_to("chat.postMessage")[0].body
    assert body["thread_ts"] == "1.5" and "<!" not in body["text"] and "&amp;" in body["text"]
