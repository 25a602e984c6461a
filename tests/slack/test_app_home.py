"""Slack App Home: the requests a person may answer (buttons that decide through the
click path) and the runs they started; refreshed on changes; refusals told on Home."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from tests.fakes.slack_api import TEAM_ID, validate_blocks
from tests.slack.conftest import ALICE, MALLORY, STARTER, Slack


async def open_home(slack: Slack, user: str, event_id: str) -> dict[str, Any]:
    """Send ``app_home_opened`` like Slack does and wait for the published view."""
    before = slack.fake.homes.get(user, {}).get("hash")
    response = await slack.event({"type": "app_home_opened", "user": user, "channel": "D0HOME",
                                  "tab": "home", "event_ts": str(time.time())}, event_id)
    assert response.status_code == 200
    await slack.wait_until(lambda: slack.fake.homes.get(user, {}).get("hash") not in (None,
                           before), what=f"views.publish for {user}")
    return slack.fake.homes[user]


def check_view(view: dict[str, Any]) -> None:
    """The published view is what Slack accepts: a home View of valid blocks."""
    assert view["type"] == "home" and len(view["blocks"]) <= 100
    assert validate_blocks(view["blocks"]) is None
    assert all(Block.parse(b) is not None for b in view["blocks"])
    View(type="home", blocks=view["blocks"]).to_dict()
    ids = [b["block_id"] for b in view["blocks"] if "block_id" in b]
    assert len(ids) == len(set(ids)), "block ids must be unique within a view"


def home_buttons(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["text"]["text"]: e for b in view["blocks"] if b["type"] == "actions"
            for e in b["elements"] if e["type"] == "button"}


def home_click(view: dict[str, Any], user: str, label: str,
               environment: str | None = "o1") -> dict[str, Any]:
    """A ``block_actions`` payload like Slack sends for a button on App Home: no
    channel, no message, no response_url; the inputs in ``view.state.values``."""
    button = home_buttons(view)[label]
    values: dict[str, Any] = {}
    for block in view["blocks"]:
        if block["type"] == "input" and block["element"]["type"] == "static_select":
            selected = ({"text": {"type": "plain_text", "text": "?"}, "value": environment}
                        if environment else None)
            values[block["block_id"]] = {"in": {"type": "static_select",
                                                "selected_option": selected}}
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "name": user.lower(),
                 "team_id": TEAM_ID},
        "api_app_id": "A0APP", "token": "legacy", "trigger_id": "1.2.3",
        "team": {"id": TEAM_ID, "domain": "fake"},
        "container": {"type": "view", "view_id": view["id"]},
        "view": {**view, "state": {"values": values}},
        "actions": [{"type": "button", "action_id": button["action_id"],
                     "block_id": "x", "value": button["value"],
                     "text": {"type": "plain_text", "text": label},
                     "action_ts": str(time.time())}],
    }


async def test_home_lists_answerable_requests_and_its_buttons_decide(slack: Slack) -> None:
    await slack.command("run deploy ship v1.2.3 <!channel> <javascript:alert(1)|x>")
    ts = await slack.wait_for_card()
    ref = slack.request_row().ref

    home = await open_home(slack, ALICE, "EvHome1")
    check_view(home)
    text = json.dumps(home)
    assert "Deploy v1.2.3?" in text and "Waiting for you" in text
    assert set(home_buttons(home)) == {"Approve", "Reject"}
    assert home_buttons(home)["Approve"]["action_id"] == f"ah:{ref}:approve"
    assert all(b["block_id"].startswith(f"{ref}|") for b in home["blocks"] if "block_id" in b)

    starter = await open_home(slack, STARTER, "EvHome2")
    check_view(starter)
    runs = json.dumps(starter)
    assert "Runs you started" in runs and "waiting for an answer" in runs
    assert "<!channel>" not in runs and "&lt;!channel&gt;" in runs  # the prompt stays inert
    assert "<javascript:" not in runs
    assert "Approve" not in home_buttons(starter)  # the starter is no approver here

    # Approve from Home: stored, decided once, every card copy updated, Home refreshed.
    click = await slack.interact(home_click(home, ALICE, "Approve", environment="o1"))
    assert click.status_code == 200
    await slack.wait_until(lambda: slack.request_row().status == "submitted", what="decision")
    row = slack.request_row()
    assert row.decided_by_user == ALICE and row.action_id == "approve"
    assert row.result["values"]["environment"] == "production"
    await slack.wait_until(lambda: slack.fake.calls_to("chat.update"), what="card update")
    assert "Answered" in json.dumps(slack.card_message(ts).blocks)
    await slack.wait_until(lambda: "Nothing is waiting for you" in json.dumps(
        slack.fake.homes[ALICE]), what="Alice's Home refreshed")
    check_view(slack.fake.homes[ALICE])
    await slack.wait_until(lambda: "finished" in json.dumps(slack.fake.homes[STARTER]),
                           what="the starter's Home shows the run finished")
    assert [e for e, _, who in slack.audit() if e == "decided"] == ["decided"]
    assert ("decided", "ok", ALICE) in slack.audit()


async def test_an_unauthorized_click_on_home_is_told_on_home(slack: Slack) -> None:
    await slack.command("run deploy ship v2")
    await slack.wait_for_card()
    home = await open_home(slack, ALICE, "EvHome3")
    mallory = await open_home(slack, MALLORY, "EvHome4")
    assert "Nothing is waiting for you" in json.dumps(mallory) and not home_buttons(mallory)

    # Mallory replays Alice's Home button: refused, told on her own Home, nothing decided.
    forged = home_click(home, MALLORY, "Approve")
    forged["view"]["id"] = mallory["id"]
    response = await slack.interact(forged)
    assert response.status_code == 200
    await slack.wait_until(lambda: "not allowed" in json.dumps(
        slack.fake.homes[MALLORY]).lower(), what="the refusal on Mallory's Home")
    check_view(slack.fake.homes[MALLORY])
    assert slack.request_row().status == "pending"
    assert any(o == "refused" and who == MALLORY for _, o, who in slack.audit())

    # A missing required value is told on Home too, and the request stays open.
    incomplete = home_click(home, ALICE, "Approve", environment=None)
    await slack.interact(incomplete)
    await slack.wait_until(lambda: "environment" in json.dumps(
        slack.fake.homes[ALICE]).lower() and ":warning:" in json.dumps(
        slack.fake.homes[ALICE]), what="the validation error on Alice's Home")
    assert slack.request_row().status == "pending"


async def test_home_refreshes_when_a_new_request_arrives(slack: Slack) -> None:
    home = await open_home(slack, ALICE, "EvHome5")
    assert "Nothing is waiting for you" in json.dumps(home)
    await slack.command("run deploy ship v3.0.0")
    await slack.wait_for_card()
    await slack.wait_until(lambda: "Deploy v3.0.0?" in json.dumps(slack.fake.homes[ALICE]),
                           what="Alice's Home shows the new request")
    # The Messages tab is not Home: nothing is published for it.
    publishes = len(slack.fake.calls_to("views.publish"))
    await slack.event({"type": "app_home_opened", "user": ALICE, "channel": "D0HOME",
                       "tab": "messages"}, "EvHome6")
    await asyncio.sleep(0.5)
    assert len(slack.fake.calls_to("views.publish")) == publishes


async def test_home_speaks_the_persons_slack_locale(slack: Slack) -> None:
    slack.fake.users[ALICE]["locale"] = "zh-CN"
    slack.fake.users[ALICE]["tz"] = "Asia/Shanghai"
    await slack.command("run deploy ship v4.0.0")
    await slack.wait_for_card()
    home = await open_home(slack, ALICE, "EvHome7")
    check_view(home)
    text = json.dumps(home, ensure_ascii=False)
    assert "等待你处理" in text and "截止" in text and "UTC+8" in text
    assert "Deploy v4.0.0?" in text  # model text is never translated
    info = [c for c in slack.fake.calls_to("users.info") if c.body.get("user") == ALICE]
    assert any(str(c.body.get("include_locale")).lower() in ("true", "1") for c in info)


def test_manifest_enables_home_and_its_event() -> None:
    import yaml

    manifest = yaml.safe_load(Path("manifest.yml").read_text())
    assert manifest["features"]["app_home"]["home_tab_enabled"] is True
    assert "app_home_opened" in manifest["settings"]["event_subscriptions"]["bot_events"]
    assert "users:read" in manifest["oauth_config"]["scopes"]["bot"]


async def test_home_refresh_is_bounded_debounced_and_skips_unchanged_views() -> None:
    """Only recent watchers are refreshed, at most MAX_WATCHERS, once per burst; a view
    identical to the one Slack already shows is not sent again."""
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.engine.results import PendingPage
    from bot.platforms.slack import home as home_module
    from tests.fakes.slack_api import BOT_TOKEN, FakeSlackAPI

    class Engine:
        reads = 0

        async def pending_page(self, identity: Any, page: int = 1,
                               per_page: int = 10) -> PendingPage:
            Engine.reads += 1
            return PendingPage([], 0, 1, per_page)

        async def runs_started_by(self, identity: Any, limit: int = 10) -> list[Any]:
            return []

        async def active_grants(self, who: Any) -> list[Any]:
            return []

        settings = None

    now = [0.0]
    with FakeSlackAPI(token=BOT_TOKEN) as fake:
        users = [f"U{i:04d}" for i in range(home_module.MAX_WATCHERS + 5)]
        fake.add_users(users)
        client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.base_url)
        tab = home_module.HomeTab(Engine(), client, debounce=0.05, clock=lambda: now[0])
        for user in users:
            await tab.opened(user)
        assert len(fake.calls_to("views.publish")) == len(users)
        assert not tab.watching(users[0]) and tab.watching(users[-1])  # oldest dropped
        for _ in range(20):  # a burst of changes: one refresh round
            tab.changed()
        await tab.drain()
        assert Engine.reads == len(users) + home_module.MAX_WATCHERS
        assert len(fake.calls_to("views.publish")) == len(users)  # nothing changed
        now[0] += home_module.WATCH_SECONDS + 1  # everyone stopped looking long ago
        tab.changed()
        await tab.drain()
        assert Engine.reads == len(users) + home_module.MAX_WATCHERS
        assert not tab.watching(users[-1])


async def test_a_home_click_decided_after_a_crash_is_told_on_home(slack: Slack) -> None:
    """A click stored from Home but left undecided (the process died after the ack) is
    decided by the worker, and the clicker is told on their Home (no channel there)."""
    import datetime as dt

    from bot.engine import Click, Identity

    await slack.command("run deploy ship v5.0.0")
    await slack.wait_for_card()
    ref = slack.request_row().ref
    slack.engine.tuning.click_lease = dt.timedelta(0)  # its holder is gone at once
    recorded = await slack.engine.record_click(
        Click("slack", ref, Identity("slack", MALLORY), "approve", {}, reply_to={}))
    assert recorded is not None  # ...and never decided by its listener
    await slack.engine.recover_clicks()  # (or the served app's worker got there first)
    await slack.wait_until(lambda: "not allowed" in json.dumps(
        slack.fake.homes.get(MALLORY, {})), what="the outcome on Mallory's Home")
    check_view(slack.fake.homes[MALLORY])
    assert slack.request_row().status == "pending"
