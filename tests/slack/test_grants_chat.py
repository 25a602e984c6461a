"""``/askhuman grants`` and the Revoke button, against the served app and the loopback
Slack fake: the list shows only to people who may answer the grant's route; a Revoke
click is decided by the engine and the clicker is told the truth, where they clicked,
in their language (revoked, already revoked, or refused with the reason); App Home
lists grants too and is refreshed after a revoke."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import select

from bot.engine import grant_rows
from bot.engine.grant_rows import Granted, Terms
from bot.engine.ports import Identity
from bot.settings import Settings
from storage import AuditLog, Database
from tests.fakes.slack_api import TEAM_ID, FakeSlackAPI, validate_blocks
from tests.renderers.helpers import assert_valid_slack, walk
from tests.slack.conftest import ALICE, BOB, MALLORY, STARTER, Slack, running_system
from tests.slack.test_app_home import check_view, open_home


def make_grant(slack: Slack, *, args: dict[str, Any] | None = None, route: str = "ops",
               uses: int = 10, by: str = ALICE) -> int:
    """A grant row made through the engine's own functions (as a decision makes it)."""
    return add_grant(slack.database, slack.engine.ctx.now(), args=args, route=route,
                     uses=uses, by=Identity("slack", by, "Alice"))


def add_grant(database: Database, now: Any, *, args: dict[str, Any] | None = None,
              route: str = "ops", uses: int = 10, by: Identity, agent: str = "deploy",
              tool: str = "restart_service", binding: str = "0" * 64) -> int:
    """A grant as a decision on ``route`` makes it (``binding``: the granted call's hash,
    which a grant of the exact same arguments matches on)."""
    granted = Granted(route=route, agent=agent, tool=tool, scope=None,
                      args=args if args is not None else {"service": "web"},
                      binding=binding, request_ref="REQ-test", run_id=None)
    with database.transaction() as session:
        return grant_rows.create(session, now, granted, Terms(3600, uses), [by]).id


def ephemeral_list(slack: Slack, user: str) -> dict[str, Any]:
    """The latest message sent through a ``response_url`` (the command's ephemeral
    reply, or its replacement after a click)."""
    calls = [b for b in slack.fake.response_url_calls if b.get("response_type") == "ephemeral"]
    assert calls, f"nothing was told to {user}"
    return calls[-1]


async def list_grants(slack: Slack, user: str) -> dict[str, Any]:
    before = len(slack.fake.response_url_calls)
    response = await slack.command("grants", user=user)
    assert response.status_code == 200
    await slack.wait_until(lambda: len(slack.fake.response_url_calls) > before,
                           what="the grants list")
    return ephemeral_list(slack, user)


def revoke_payload(user: str, grant_id: int, message: dict[str, Any] | None = None
                   ) -> dict[str, Any]:
    """A ``block_actions`` payload like Slack sends for Revoke on the ephemeral list."""
    aid = f"ahg:{grant_id}"
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "name": user.lower(),
                 "team_id": TEAM_ID},
        "api_app_id": "A0APP", "token": "legacy", "trigger_id": "1.2.3",
        "team": {"id": TEAM_ID, "domain": "fake"},
        "container": {"type": "message", "message_ts": "1.000", "channel_id": "C0ORIGIN",
                      "is_ephemeral": True},
        "channel": {"id": "C0ORIGIN", "name": "origin"},
        "message": message or {"type": "message", "ts": "1.000", "text": "grants"},
        "response_url": "",
        "actions": [{"type": "button", "action_id": aid, "block_id": f"grant:{grant_id}",
                     "value": aid, "text": {"type": "plain_text", "text": "Revoke"},
                     "action_ts": str(time.time())}],
    }


async def click_revoke(slack: Slack, user: str, grant_id: int) -> dict[str, Any]:
    """Click Revoke; returns what replaced the list (or was told) afterwards."""
    payload = revoke_payload(user, grant_id)
    payload["response_url"] = slack.fake.response_url("revoke")
    before = len(slack.fake.response_url_calls)
    response = await slack.interact(payload)
    assert response.status_code == 200
    await slack.wait_until(lambda: len(slack.fake.response_url_calls) > before,
                           what="the answer to a revoke")
    return slack.fake.response_url_calls[-1]


def buttons(message: dict[str, Any]) -> list[str]:
    return [d["action_id"] for d in walk(message.get("blocks", []))
            if d.get("type") == "button"]


async def active(slack: Slack, grant_id: int) -> bool:
    found = await slack.engine.grant(grant_id)
    assert found is not None
    return found.active


def audit_events(database: Database, event: str) -> list[AuditLog]:
    with database.transaction() as session:
        rows = list(session.scalars(select(AuditLog).where(AuditLog.event == event)))
        for row in rows:
            session.expunge(row)
        return rows


async def test_the_list_shows_only_to_people_who_may_answer_the_route(slack: Slack) -> None:
    grant_id = make_grant(slack)
    listed = await list_grants(slack, ALICE)
    assert_valid_slack(listed)
    assert validate_blocks(listed["blocks"]) is None
    text = json.dumps(listed)
    assert "G-1" in text and "`deploy` may run `restart_service`" in text
    assert "the exact same arguments" in text and "service=web" in text
    assert "granted by Alice" in text and "10 of 10 uses left" in text and "UTC" in text
    assert buttons(listed) == [f"ahg:{grant_id}"]
    by_group = await list_grants(slack, BOB)  # an approver through the ops group
    assert buttons(by_group) == [f"ahg:{grant_id}"]
    outsider = await list_grants(slack, MALLORY)
    assert outsider["text"] == "No active standing grants on the routes you may answer."
    assert buttons(outsider) == []
    starter = await list_grants(slack, STARTER)  # may start the agent, not answer it
    assert buttons(starter) == []


async def test_revoke_is_decided_and_told_revoked_then_already(slack: Slack) -> None:
    grant_id = make_grant(slack)
    kept = make_grant(slack, args={"service": "db"})
    replaced = await click_revoke(slack, ALICE, grant_id)
    assert replaced["replace_original"] is True
    assert_valid_slack(replaced)
    assert replaced["text"].startswith(f"Revoked standing grant G-{grant_id}; matching calls "
                                       "get a card again.")
    assert buttons(replaced) == [f"ahg:{kept}"]  # the fresh list: only what is left
    assert not await active(slack, grant_id) and await active(slack, kept)
    [revoked] = audit_events(slack.database, "grant_revoked")
    assert revoked.actor_user == ALICE
    again = await click_revoke(slack, ALICE, grant_id)
    assert again["text"].startswith(f"Standing grant G-{grant_id} was already revoked or has "
                                    "run out.")
    assert len(audit_events(slack.database, "grant_revoked")) == 1
    gone = await click_revoke(slack, ALICE, 999)
    assert gone["text"].startswith("There is no standing grant G-999.")


async def test_an_outsider_revoke_is_refused_with_the_reason(slack: Slack) -> None:
    grant_id = make_grant(slack)
    told = await click_revoke(slack, MALLORY, grant_id)
    assert told["text"].startswith(f"You may not revoke G-{grant_id}: You are not allowed")
    assert buttons(told) == []  # their fresh list shows them nothing
    assert await active(slack, grant_id)
    assert audit_events(slack.database, "grant_revoked") == []


async def test_refusals_and_lists_speak_the_clickers_language(slack: Slack) -> None:
    slack.fake.users[MALLORY]["locale"] = "zh-CN"
    slack.fake.users[ALICE]["locale"] = "zh-CN"
    grant_id = make_grant(slack)
    told = await click_revoke(slack, MALLORY, grant_id)
    assert told["text"].startswith(f"你不能撤销 G-{grant_id}：")
    listed = await list_grants(slack, ALICE)
    assert "你可以撤销的长期授权（1 个）" in json.dumps(listed, ensure_ascii=False)
    done = await click_revoke(slack, ALICE, grant_id)
    assert done["text"].startswith(f"已撤销长期授权 G-{grant_id}")


async def test_model_written_arguments_stay_inert(slack: Slack) -> None:
    make_grant(slack, args={"note": "<!channel> @here <@U0ALICE>",
                            "link": "<javascript:alert(1)|click me>"})
    listed = await list_grants(slack, ALICE)
    assert_valid_slack(listed)  # no mention, broadcast or unsafe link survives
    raw = json.dumps(listed)
    assert "<!channel>" not in raw and "<javascript:" not in raw and "<@U0ALICE>" not in raw
    assert "&lt;!channel&gt;" in raw


async def test_help_and_the_manifest_name_the_grants_command(slack: Slack) -> None:
    before = len(slack.fake.response_url_calls)
    await slack.command("help", user=ALICE)
    await slack.wait_until(lambda: len(slack.fake.response_url_calls) > before, what="help")
    assert "`/askhuman grants` — the standing grants you may revoke." in (
        slack.fake.response_url_calls[-1]["text"])
    manifest = (Path(__file__).resolve().parents[2] / "manifest.yml").read_text()
    assert 'usage_hint: "run <agent> <prompt> | pending | grants |' in manifest


async def test_expiry_in_the_route_time_zone_else_the_readers(
        fake_slack: FakeSlackAPI, settings: Settings) -> None:
    fake_slack.users[ALICE]["tz"] = "Asia/Tokyo"
    async with running_system(fake_slack, settings) as slack:
        expires = make_grant(slack)
        found = await slack.engine.grant(expires)
        assert found is not None
        tokyo = found.expires_at.astimezone(ZoneInfo("Asia/Tokyo"))
        listed = json.dumps(await list_grants(slack, ALICE))
        assert f"until {tokyo:%Y-%m-%d %H:%M} UTC+9" in listed  # the route sets no zone
    routes = {"ops": settings.routes["ops"].model_copy(update={"timezone": "Asia/Shanghai"})}
    async with running_system(fake_slack, settings.model_copy(update={"routes": routes})
                              ) as slack:
        shanghai = found.expires_at.astimezone(ZoneInfo("Asia/Shanghai"))
        listed = json.dumps(await list_grants(slack, ALICE))
        assert f"until {shanghai:%Y-%m-%d %H:%M} UTC+8" in listed  # the route's zone wins


async def test_app_home_lists_grants_and_revokes_from_there(slack: Slack) -> None:
    grant_id = make_grant(slack)
    home = await open_home(slack, ALICE, "EvGrantHome1")
    check_view(home)
    assert f"ahg:{grant_id}" in buttons(home)
    outsider = await open_home(slack, MALLORY, "EvGrantHome2")
    assert buttons(outsider) == []
    bob = await open_home(slack, BOB, "EvGrantHome3")  # watching: refreshed on the revoke
    assert f"ahg:{grant_id}" in buttons(bob)

    payload = revoke_payload(ALICE, grant_id)
    payload.pop("message"), payload.pop("channel"), payload.pop("response_url")
    payload["container"] = {"type": "view", "view_id": home["id"]}
    payload["view"] = {**home, "state": {"values": {}}}
    before = slack.fake.homes[ALICE]["hash"]
    assert (await slack.interact(payload)).status_code == 200
    await slack.wait_until(lambda: slack.fake.homes[ALICE]["hash"] != before,
                           what="Home republished after the revoke")
    after = slack.fake.homes[ALICE]
    check_view(after)
    assert f":white_check_mark: Revoked standing grant G-{grant_id}" in json.dumps(after)
    assert buttons(after) == []
    assert not await active(slack, grant_id)
    await slack.wait_until(lambda: f"ahg:{grant_id}" not in buttons(slack.fake.homes[BOB]),
                           what="Bob's Home refreshed after Alice's revoke")


async def test_failures_are_told_never_silent(slack: Slack,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    grant_id = make_grant(slack)

    async def broken(*_: Any) -> Any:
        raise RuntimeError("the grants table is gone")

    monkeypatch.setattr(slack.engine, "revoke_grant", broken)
    told = await click_revoke(slack, ALICE, grant_id)
    assert told["text"].startswith("Something went wrong; please try again.")
    assert await active(slack, grant_id)
    monkeypatch.setattr(slack.engine, "active_grants", broken)
    listed = await list_grants(slack, ALICE)
    assert listed["text"] == ("I couldn't list the standing grants just now; please try "
                              "again shortly.")
