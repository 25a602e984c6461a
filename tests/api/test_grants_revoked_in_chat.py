"""A standing grant revoked from Slack takes effect at once: the next matching call over
the API door gets a card again (the grant approved the one before, without a card).
Also the whole loop: a grant made on a card is listed by ``/askhuman grants``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.engine.ports import Identity
from bot.tools.binding import binding_hash
from tests.api.conftest import Client, Door, add_client, running_door
from tests.api.test_grants import approval, grant_click, grant_settings, slack_card
from tests.fakes.feishu_api import FakeFeishuApi
from tests.fakes.slack_api import FakeSlackAPI
from tests.renderers.helpers import walk
from tests.slack.conftest import ALICE
from tests.slack.test_grants_chat import add_grant, revoke_payload

CALL = {"command": "ls /srv", "timeout": 30}


async def ask(door: Door, ci: Client) -> str:
    body = {"route": "fin", "tool_name": "Bash", "args": CALL}
    created = await door.http.post(door.api("/approvals"), json=body, headers=ci.headers)
    assert created.status_code == 201, created.text
    return str(created.json()["ref"])


async def test_revoke_from_slack_then_the_next_call_gets_a_card(door: Door, ci: Client) -> None:
    grant_id = add_grant(door.database, door.engine.ctx.now(), route="fin", agent="ci-bot",
                         tool="Bash", args=CALL, binding=binding_hash("Bash", CALL, {}),
                         by=Identity("slack", ALICE, "Alice"))
    first = await ask(door, ci)
    decided = (await door.get(ci, first, wait=5)).json()
    assert decided["decision"] is not None and decided["decision"]["approved"] is True
    assert not door.slack.fake.calls_to("chat.postMessage")  # approved without a card

    payload = revoke_payload(ALICE, grant_id)
    payload["response_url"] = door.slack.fake.response_url("revoke")
    assert (await door.slack.interact(payload)).status_code == 200
    await door.slack.wait_until(lambda: door.slack.fake.response_url_calls, what="revoked")
    assert door.slack.fake.response_url_calls[-1]["text"].startswith(
        f"Revoked standing grant G-{grant_id}")

    second = await ask(door, ci)
    await door.slack.wait_for_card("C0FIN")
    assert (await door.get(ci, second)).json()["decision"] is None


@pytest.fixture
async def grant_door(fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str],
                     tmp_path: Path) -> AsyncIterator[Door]:
    settings = grant_settings(f"sqlite:///{tmp_path / 'askhuman.db'}", max_uses=3)
    async with running_door(fake_slack, fake_feishu, settings) as system:
        yield system


async def test_a_grant_made_on_a_card_is_listed_and_revoked_in_slack(
        grant_door: Door) -> None:
    """The whole loop: "Approve and allow similar…" on the card, ``/askhuman grants``
    shows the grant it made, Revoke, and the next matching call gets a card."""
    door = grant_door
    ci = add_client(door.database, "ci-bot", ["ops"])
    first = await approval(door, ci)
    ts = await slack_card(door, first["ref"])
    assert (await door.slack.interact(grant_click(door, ts, "4h", "3"))).status_code == 200
    assert (await door.get(ci, first["ref"], wait=10)).json()["decision"]["approved"]
    covered = await approval(door, ci)
    assert covered["decided_by"]["platform"] == "grant"  # 2 of 3 uses left now

    before = len(door.slack.fake.response_url_calls)
    await door.slack.command("grants", user=ALICE)
    await door.slack.wait_until(lambda: len(door.slack.fake.response_url_calls) > before,
                                what="the grants list")
    listed = door.slack.fake.response_url_calls[-1]
    text = json.dumps(listed)
    assert "`ci-bot` may run `restart_service` with the exact same arguments" in text
    assert "service=web" in text and "granted by u0alice" in text
    assert "2 of 3 uses left" in text
    [revoke] = [d["action_id"] for d in walk(listed["blocks"]) if d.get("type") == "button"]
    grant_id = int(revoke.removeprefix("ahg:"))

    payload = revoke_payload(ALICE, grant_id)
    payload["response_url"] = door.slack.fake.response_url("revoke")
    before = len(door.slack.fake.response_url_calls)
    assert (await door.slack.interact(payload)).status_code == 200
    await door.slack.wait_until(lambda: len(door.slack.fake.response_url_calls) > before,
                                what="revoked")
    assert door.slack.fake.response_url_calls[-1]["text"].startswith(
        f"Revoked standing grant G-{grant_id}")
    after = await approval(door, ci)
    assert after["status"] == "pending"  # revoked at once: a card again
    await slack_card(door, after["ref"])
