"""Standing grants through the served app: made from a Slack card (selects in the
message) and from a Feishu card (a form), used by the API's approvals at once and
without a card, counted exactly under concurrency (also across two replicas on
PostgreSQL), revoked from the CLI; the audit chain verifies after all of it."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import select

from bot.engine import audit_chain, receipts
from bot.settings import Settings
from storage import AuditLog, Database, HumanRequest, ResumeJob, Run
from storage.grants import Grant
from tests.api.conftest import (
    FEISHU_ALICE,
    FEISHU_APPROVALS,
    Client,
    Door,
    Receiver,
    add_client,
    make_settings,
    running_door,
    webhook_json,
)
from tests.fakes.asgi_server import serve_in_loop
from tests.fakes.feishu_api import FakeFeishuApi
from tests.fakes.slack_api import FakeSlackAPI
from tests.ops.test_admin_cli import as_json, cli
from tests.slack.conftest import ALICE

RESTART = {"route": "ops", "tool_name": "restart_service", "args": {"service": "web"}}
GRANT_LABEL = "Approve and allow similar…"


def grant_settings(db_url: str, max_uses: int = 50) -> Settings:
    raw = make_settings(db_url).model_dump(mode="json", exclude={"source"})
    raw["routes"]["ops"]["grants"] = {"max_duration": "8h", "max_uses": max_uses}
    return Settings.model_validate(raw)


@pytest.fixture
async def door(fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str],
               tmp_path: Path) -> AsyncIterator[Door]:
    settings = grant_settings(f"sqlite:///{tmp_path / 'askhuman.db'}", max_uses=3)
    async with running_door(fake_slack, fake_feishu, settings) as system:
        yield system


@pytest.fixture
def ci(door: Door) -> Client:
    return add_client(door.database, "ci-bot", ["ops"])


async def approval(door: Door, client: Client, body: dict[str, Any] = RESTART) -> dict[str, Any]:
    created = await door.http.post(door.api("/approvals"), json=body, headers=client.headers)
    assert created.status_code == 201, created.text
    data: dict[str, Any] = created.json()
    return data


async def slack_card(door: Door, ref: str) -> str:
    for _ in range(500):
        for message in list(door.slack.fake.messages.values()):
            if message.blocks and ref in str(message.blocks):
                return str(message.ts)
        await asyncio.sleep(0.02)
    raise AssertionError(f"no Slack card for {ref}")


def grant_click(door: Door, ts: str, duration: str, uses: str) -> dict[str, Any]:
    """The card's "Approve and allow similar…" click with both selects picked, by the
    option texts the approver sees (Slack sends them in ``state.values``)."""
    payload = door.slack.click_payload(ts, GRANT_LABEL, ALICE, environment=None)
    blocks = door.slack.card_message(ts).blocks
    wanted = iter([duration, uses])
    for block in blocks:
        element = block.get("element") or {}
        if block["type"] != "input" or element.get("type") != "static_select":
            continue
        text = next(wanted)
        option = next(o for o in element["options"] if o["text"]["text"] == text)
        payload["state"]["values"][block["block_id"]][element["action_id"]][
            "selected_option"] = option
    return payload


async def told_in_slack(door: Door, user: str) -> str:
    """What the clicker was told ephemerally (Slack shows the card's update to all)."""
    for _ in range(500):
        told = door.slack.ephemerals_to(user)
        if told:
            return told[-1]
        await asyncio.sleep(0.02)
    raise AssertionError(f"{user} was told nothing")


def grants(database: Database) -> list[Grant]:
    with database.transaction() as session:
        rows = list(session.scalars(select(Grant).order_by(Grant.id)))
        for row in rows:
            session.expunge(row)
        return rows


def chain_ok(database: Database) -> bool:
    with database.transaction() as session:
        audit_chain.seal(session, dt.datetime(2100, 1, 1), limit=100_000)
    with database.transaction() as session:
        return audit_chain.verify(session).ok


async def test_a_grant_from_a_slack_card_approves_the_next_call_at_once(
    door: Door, ci: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(receipts.KEY_ENV, "receipt-test-key")
    first = await approval(door, ci)
    ts = await slack_card(door, first["ref"])
    labels = list(door.slack.buttons(ts))
    assert labels == ["Approve", GRANT_LABEL, "Reject"]
    options = [[o["text"]["text"] for o in b["element"]["options"]]
               for b in door.slack.card_message(ts).blocks
               if b["type"] == "input" and b["element"]["type"] == "static_select"]
    assert options == [["15m", "1h", "4h", "8h"], ["1", "3"]]
    clicked = await door.slack.interact(grant_click(door, ts, "4h", "3"))
    assert clicked.status_code == 200
    decided = await door.get(ci, first["ref"], wait=10)
    assert decided.json()["decision"]["approved"] is True
    [grant] = grants(door.database)
    assert (grant.agent, grant.tool, grant.max_uses, grant.granted_by_platform) == (
        "ci-bot", "restart_service", 3, "slack")
    told = await told_in_slack(door, ALICE)
    assert f"Standing grant G-{grant.id} approves similar calls for 4h, at most 3" in told
    assert (grant.expires_at - grant.created_at).total_seconds() == 4 * 3600

    cards_before = len([m for m in door.slack.fake.messages.values() if m.blocks])
    again = await approval(door, ci)
    assert again["status"] == "submitted" and again["decision"]["approved"] is True
    assert again["decided_by"]["platform"] == "grant"
    assert again["decided_by"]["name"] == f"standing grant G-{grant.id} from u0alice"
    other = await approval(door, ci, {**RESTART, "args": {"service": "db"}})
    assert other["status"] == "pending"
    await slack_card(door, other["ref"])
    stranger = add_client(door.database, "other-bot", ["ops"])  # another client: its own
    theirs = await approval(door, stranger)
    assert theirs["status"] == "pending"
    await slack_card(door, theirs["ref"])
    assert len([m for m in door.slack.fake.messages.values() if m.blocks]) == cards_before + 2

    config = tmp_path / "askhuman.yaml"
    config.write_text(yaml.safe_dump({"database_url": str(door.database.url), "routes": {
        "ops": {"slack": {"channel": "C0X", "approvers": {"users": [ALICE]}}}}}))
    listed = as_json(await cli("grants", "list", "--json", "--config", str(config)))
    assert [(g["id"], g["uses"]) for g in listed] == [(f"G-{grant.id}", "1/3")]
    shown = as_json(await cli("grants", "show", f"G-{grant.id}", "--json",
                              "--config", str(config)))
    assert shown["args"] == {"service": "web"} and shown["scope"] == "same arguments"
    revoked = as_json(await cli("grants", "revoke", f"G-{grant.id}", "--json",
                                "--config", str(config)))
    assert revoked[0]["outcome"] == "accepted"
    twice = await cli("grants", "revoke", f"G-{grant.id}", "--config", str(config))
    assert twice.exit_code == 1 and "already revoked" in twice.stdout
    after = await approval(door, ci)
    assert after["status"] == "pending"  # revoked at once: a card again
    await slack_card(door, after["ref"])
    assert as_json(await cli("grants", "list", "--json", "--config", str(config))) == []
    with door.database.transaction() as session:
        revoke = session.scalars(select(AuditLog).where(AuditLog.event == "grant_revoked")).one()
        assert revoke.actor_platform == "cli"
    shown = as_json(await cli("requests", "show", again["ref"], "--json",
                              "--config", str(config)))
    assert "grant_used" in [a["event"] for a in shown["audit"]]
    checked = as_json(await cli("receipt", "verify", shown["receipt"], "--check-database",
                                "--json", "--config", str(config)))
    assert checked["valid"] and checked["matches_database"]
    assert checked["deciders"] == [f"grant:G-{grant.id}"]
    assert [(g["event"], g["grant"]) for g in checked["grants"]] == [
        ("grant_used", f"G-{grant.id}"), ("grant_created", f"G-{grant.id}")]
    words = await cli("receipt", "verify", shown["receipt"], "--check-database",
                      "--config", str(config))
    assert f"grant_created G-{grant.id}" in words.stdout and "at most 3 uses" in words.stdout
    assert chain_ok(door.database)


async def test_a_grant_from_a_feishu_form(door: Door, ci: Client) -> None:
    first = await approval(door, ci)
    card = await door.feishu_card()
    # The form carries both selects: o1 is the second option (1h; 3 uses).
    response = await door.click_feishu(card, first["ref"], action="approve_grant",
                                       operator=FEISHU_ALICE,
                                       form={"f_grant_duration": "o1", "f_grant_uses": "o1"})
    toast = door.feishu_taken(response)
    if toast["type"] == "success":  # decided before the toast: it says what was granted
        assert "Standing grant G-" in str(toast["content"])
    decided = await door.get(ci, first["ref"], wait=10)
    assert decided.json()["decision"]["approved"] is True
    [grant] = grants(door.database)
    assert (grant.granted_by_platform, grant.max_uses) == ("feishu", 3)
    assert (grant.expires_at - grant.created_at).total_seconds() == 3600
    again = await approval(door, ci)
    assert again["status"] == "submitted" and again["decided_by"]["platform"] == "grant"
    assert card.chat_id == FEISHU_APPROVALS


async def test_ten_concurrent_calls_with_three_uses_left(door: Door, ci: Client) -> None:
    first = await approval(door, ci)
    ts = await slack_card(door, first["ref"])
    await door.slack.interact(grant_click(door, ts, "1h", "3"))
    await door.get(ci, first["ref"], wait=10)
    assert grants(door.database)[0].max_uses == 3
    answers = await asyncio.gather(*(approval(door, ci) for _ in range(10)))
    statuses = sorted(a["status"] for a in answers)
    assert statuses == ["pending"] * 7 + ["submitted"] * 3
    pending = [a["ref"] for a in answers if a["status"] == "pending"]
    for ref in pending:
        await slack_card(door, ref)  # each of the seven got its card
    assert grants(door.database)[0].uses == 3
    assert chain_ok(door.database)


async def test_a_call_a_grant_approves_is_settled_at_once_and_its_webhook_sent(
    door: Door, ci: Client,
) -> None:
    """No resume job for a call a grant answers when it is created: its run is finished
    and its signed webhook queued in that same transaction (nothing left to resume,
    nothing that a crash could lose)."""
    first = await approval(door, ci)
    ts = await slack_card(door, first["ref"])
    await door.slack.interact(grant_click(door, ts, "1h", "3"))
    await door.get(ci, first["ref"], wait=10)
    receiver = Receiver()
    async with serve_in_loop(receiver.app()) as url:
        answer = await approval(door, ci, {**RESTART, "callback_url": f"{url}/hook"})
        assert answer["status"] == "submitted", answer
        [(_headers, raw)] = await receiver.wait(1)
    delivered = webhook_json(raw)
    assert delivered["data"]["ref"] == answer["ref"]
    assert delivered["data"]["decision"]["approved"] is True
    with door.database.transaction() as session:
        request = session.scalars(select(HumanRequest).where(
            HumanRequest.ref == answer["ref"])).one()
        jobs = session.scalars(select(ResumeJob).where(
            ResumeJob.request_id == request.id)).all()
        run = session.get(Run, request.run_id)
        settled = session.scalars(select(AuditLog).where(
            AuditLog.request_ref == answer["ref"], AuditLog.event == "external_settled")).all()
        assert jobs == [] and run is not None and run.status == "succeeded"
        assert len(settled) == 1
    assert chain_ok(door.database)


@pytest.mark.postgres
async def test_two_replicas_share_the_uses(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], postgres_url: str,
) -> None:
    settings = grant_settings(postgres_url, max_uses=3)
    async with running_door(fake_slack, fake_feishu, settings) as a, \
            running_door(fake_slack, fake_feishu, copy.deepcopy(settings)) as b:
        client = add_client(a.database, "ci-bot", ["ops"])
        first = await approval(a, client)
        ts = await slack_card(a, first["ref"])
        await b.slack.interact(grant_click(b, ts, "1h", "3"))
        await a.get(client, first["ref"], wait=10)
        doors = [a, b] * 5
        answers = await asyncio.gather(*(approval(d, client) for d in doors))
        assert sorted(x["status"] for x in answers) == ["pending"] * 7 + ["submitted"] * 3
        with a.database.transaction() as session:
            assert session.scalars(select(Grant.uses)).one() == 3
            used = session.scalars(select(AuditLog).where(AuditLog.event == "grant_used")).all()
            assert len(used) == 3
            carded = session.scalars(select(HumanRequest).where(
                HumanRequest.status == "pending")).all()
            assert len(carded) == 7
        assert chain_ok(a.database)
