"""Batch decisions on Slack, end to end: ``/askhuman pending`` lists the requests with
checkboxes, "Approve selected" / "Reject selected" decide each as a lone click would,
the clicker reads what became of each, and every card is updated."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.settings import Settings
from storage import AuditLog, HumanRequest
from tests.engine.batch_rows import api_client, ask_form, ask_tool
from tests.fakes.slack_api import TEAM_ID, FakeSlackAPI, validate_blocks
from tests.slack.conftest import ALICE, APPROVALS, BOB, MALLORY, Slack, running_system

STRICT = "C0STRICT"
OTHER = "C0OTHER"


def batch_settings(db_url: str) -> Settings:
    people = {"users": [ALICE, BOB]}
    return Settings.model_validate({
        "database_url": db_url,
        "agents": {"deploy": {"model": "scripted:deploy", "route": "ops"}},
        "routes": {
            "ops": {"timeout": "30m", "require_reason": ["reject"],
                    "slack": {"channel": APPROVALS, "approvers": people}},
            "strict": {"timeout": "30m", "require_reason": ["approve"],
                       "slack": {"channel": STRICT, "approvers": people}},
            "other": {"timeout": "30m", "slack": {"channel": OTHER,
                                                   "approvers": {"users": [MALLORY]}}},
        },
    })


@pytest.fixture
async def system(fake_slack: FakeSlackAPI, db_url: str) -> Any:
    async with running_system(fake_slack, batch_settings(db_url)) as slack:
        yield slack


async def list_for(slack: Slack, user: str = ALICE, text: str = "pending") -> dict[str, Any]:
    before = len(slack.fake.response_url_calls)
    assert (await slack.command(text, user=user)).status_code == 200
    await slack.wait_until(lambda: len(slack.fake.response_url_calls) > before,
                           what="the pending list")
    reply = slack.fake.response_url_calls[-1]
    assert reply["response_type"] == "ephemeral"
    assert validate_blocks(reply["blocks"]) is None, validate_blocks(reply["blocks"])
    return dict(reply)


def offered(reply: dict[str, Any]) -> list[str]:
    """Refs offered with a checkbox, in list order."""
    return [o["value"] for b in reply["blocks"] if b.get("block_id", "").startswith("ahb_sel:")
            for o in b["element"]["options"]]


def batch_payload(slack: Slack, user: str, verb: str, refs: list[str],
                  reason: str | None = None, home: bool = False) -> dict[str, Any]:
    values: dict[str, Any] = {"ahb_sel:0": {"in": {"type": "checkboxes", "selected_options": [
        {"value": ref, "text": {"type": "plain_text", "text": "?"}} for ref in refs]}}}
    if reason is not None:
        values["ahb_reason"] = {"in": {"type": "plain_text_input", "value": reason}}
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": TEAM_ID},
        "api_app_id": "A0APP", "token": "legacy", "trigger_id": "1.2.3",
        "team": {"id": TEAM_ID, "domain": "fake"},
        "response_url": slack.fake.response_url("batch"),
        "actions": [{"type": "button", "action_id": f"ahb:{verb}", "block_id": "ahb_go",
                     "value": verb, "action_ts": str(time.time())}],
    }
    if home:
        payload["container"] = {"type": "view", "view_id": "V1"}
        payload["view"] = {"type": "home", "id": "V1", "state": {"values": values}}
    else:
        payload["container"] = {"type": "message", "message_ts": "1.1", "channel_id": "C0DM",
                                "is_ephemeral": True}
        payload["channel"] = {"id": "C0DM", "name": "directmessage"}
        payload["state"] = {"values": values}
    return payload


async def batch(slack: Slack, user: str, verb: str, refs: list[str],
                reason: str | None = None) -> dict[str, Any]:
    """Click "Approve/Reject selected"; returns the list that replaced the old one."""
    before = len(slack.fake.response_url_calls)
    response = await slack.interact(batch_payload(slack, user, verb, refs, reason))
    assert response.status_code == 200
    await slack.wait_until(lambda: len(slack.fake.response_url_calls) > before, timeout=20,
                           what="the batch answer")
    reply = dict(slack.fake.response_url_calls[-1])
    assert reply.get("replace_original") is True and reply["response_type"] == "ephemeral"
    return reply


def status(slack: Slack, ref: str) -> HumanRequest:
    with slack.database.transaction() as session:
        row = session.scalars(select(HumanRequest).where(HumanRequest.ref == ref)).one()
        session.expunge(row)
        return row


def audits(slack: Slack, event: str) -> list[AuditLog]:
    with slack.database.transaction() as session:
        rows = list(session.scalars(select(AuditLog).where(AuditLog.event == event)))
        for row in rows:
            session.expunge(row)
        return rows


def card_of(slack: Slack, ref: str) -> Any:
    """The Slack message of ``ref``'s card (its buttons carry the ref)."""
    for message in slack.fake.messages.values():
        if message.blocks and ref in json.dumps(message.blocks):
            return message
    raise AssertionError(f"no card for {ref}")


async def cards_posted(slack: Slack, refs: list[str]) -> None:
    await slack.wait_until(lambda: all(any(m.blocks and r in json.dumps(m.blocks)
                                           for m in list(slack.fake.messages.values()))
                                       for r in refs), what="every card posted")


async def test_approve_selected_decides_each_and_names_the_ones_not_recorded(
        system: Slack) -> None:
    slack, engine = system, system.engine
    client = api_client(engine, ["ops", "strict", "other"])
    tools = [await ask_tool(engine, client, "ops", f"restart_{i}") for i in range(3)]
    form = await ask_form(engine, client, "ops", "Ship v2")
    strict = await ask_tool(engine, client, "strict", "drop_table")
    raced = await ask_tool(engine, client, "ops", "rotate_keys")
    on_card = await ask_form(engine, client, "ops", "Pick env", required_field=True)
    await cards_posted(slack, [*tools, form, strict, raced, on_card])

    listing = await list_for(slack)
    shown = json.dumps(listing["blocks"])
    assert sorted(offered(listing)) == sorted([*tools, form, strict, raced])
    assert on_card not in offered(listing) and "Pick env (answer it on its card)" in shown
    assert "Route ops" in shown and "Route strict" in shown
    assert {b.get("block_id") for b in listing["blocks"]} >= {"ahb_reason", "ahb_go"}

    cards = {ref: card_of(slack, ref).ts for ref in [*tools, form, strict, raced]}
    # Bob answers one on its card before Alice's batch arrives.
    bob = slack.click_payload(card_of(slack, raced).ts, "Approve", BOB)
    assert (await slack.interact(bob)).status_code == 200
    await slack.wait_until(lambda: status(slack, raced).status == "submitted")
    updates_before = len(slack.fake.calls_to("chat.update"))

    answer = await batch(slack, ALICE, "approve", offered(listing))
    text = answer["text"]
    assert text.startswith("Approved 4. Not recorded: ")
    assert "\u201cApprove tool call: drop_table\u201d (needs a reason)" in text
    assert "\u201cApprove tool call: rotate_keys\u201d (Already decided by u0bob (Approve)" in text
    for ref in [*tools, form]:
        row = status(slack, ref)
        assert row.status == "submitted" and row.decided_by_user == ALICE
    assert status(slack, form).result["action"]["id"] == "go"
    assert status(slack, strict).status == "pending"
    assert status(slack, raced).decided_by_user == BOB
    # Every decided card is updated for everyone, and the new list no longer offers them.
    await slack.wait_until(lambda: len(slack.fake.calls_to("chat.update")) >= updates_before + 4,
                           what="four card updates")
    for ref in [*tools, form]:
        shown = json.dumps(slack.card_message(cards[ref]).blocks)
        assert ALICE in shown and ref not in shown  # decided by Alice, no buttons left
    assert strict in json.dumps(slack.card_message(cards[strict], STRICT).blocks)  # open
    assert offered(answer) == [strict]
    [summary] = audits(slack, "batch_decided")
    assert summary.actor_user == ALICE and sorted(summary.details["decided"]) == sorted(
        [*tools, form])
    assert set(summary.details["refused"]) == {strict, raced}


async def test_reject_selected_applies_the_one_reason_to_each(system: Slack) -> None:
    slack, engine = system, system.engine
    client = api_client(engine, ["ops"])
    refs = [await ask_tool(engine, client, "ops", f"scale_{i}") for i in range(3)]
    await cards_posted(slack, refs)

    refused = await batch(slack, ALICE, "reject", refs)  # ops needs a reason to reject
    assert refused["text"].startswith("Rejected 0. Not recorded: ")
    assert refused["text"].count("(needs a reason)") == 3

    answer = await batch(slack, ALICE, "reject", refs, reason="not during the freeze")
    assert answer["text"].startswith("Rejected 3.") and "Not recorded" not in answer["text"]
    for ref in refs:
        row = status(slack, ref)
        assert row.status == "submitted" and row.result["action"]["id"] == "reject"
        assert row.result["values"]["reason"] == "not during the freeze"


async def test_a_request_of_another_route_is_not_listed_and_a_forged_batch_is_refused_per_item(
        system: Slack) -> None:
    slack, engine = system, system.engine
    client = api_client(engine, ["ops", "other"])
    mine = await ask_tool(engine, client, "ops", "mine")
    theirs = await ask_tool(engine, client, "other", "theirs")
    await cards_posted(slack, [mine, theirs])

    assert offered(await list_for(slack)) == [mine]
    answer = await batch(slack, ALICE, "approve", [mine, theirs, "nosuchref"])
    assert answer["text"].startswith("Approved 1. Not recorded: ")
    assert "\u201cApprove tool call: theirs\u201d (" in answer["text"]
    assert status(slack, mine).status == "submitted"
    assert status(slack, theirs).status == "pending"
    refusals = [a for a in audits(slack, "respond_unauthorized") if a.request_ref == theirs]
    assert refusals and refusals[0].actor_user == ALICE


async def test_more_than_twenty_shows_the_first_twenty_and_a_pointer(system: Slack) -> None:
    slack, engine = system, system.engine
    client = api_client(engine, ["ops"])
    refs = [await ask_tool(engine, client, "ops", f"job_{i}") for i in range(23)]
    await cards_posted(slack, refs)
    listing = await list_for(slack)
    assert offered(listing) == refs[:20]
    groups = [b for b in listing["blocks"] if b.get("block_id", "").startswith("ahb_sel:")]
    assert [len(b["element"]["options"]) for b in groups] == [10, 10]  # Slack's limit
    assert "Showing 1–20 of 23 (page 1 of 2) — `/askhuman pending 2`" in json.dumps(
        listing["blocks"], ensure_ascii=False)
    assert offered(await list_for(slack, text="pending 2")) == refs[20:]

    answer = await batch(slack, ALICE, "approve", refs)  # a forged payload naming all 23
    assert answer["text"].startswith("Approved 20.")
    assert "3 more were not processed (at most 20 at a time)." in answer["text"]
    assert offered(answer) == refs[20:]


async def test_a_batch_racing_single_clicks_decides_each_request_once(system: Slack) -> None:
    slack, engine = system, system.engine
    client = api_client(engine, ["ops"])
    refs = [await ask_tool(engine, client, "ops", f"race_{i}") for i in range(8)]
    await cards_posted(slack, refs)
    singles = [slack.interact(slack.click_payload(card_of(slack, ref).ts, "Approve", BOB))
               for ref in refs]
    batch_click = slack.interact(batch_payload(slack, ALICE, "approve", refs))
    responses = await asyncio.gather(batch_click, *singles)
    assert all(r.status_code == 200 for r in responses)
    await slack.wait_until(lambda: len(audits(slack, "batch_decided")) == 1, timeout=20)
    await slack.wait_until(lambda: all(status(slack, r).status == "submitted" for r in refs))
    decided = [a.request_ref for a in audits(slack, "decided")]
    assert sorted(decided) == sorted(refs)  # one decision per request, whoever won
    [summary] = audits(slack, "batch_decided")
    alice = [r for r in refs if status(slack, r).decided_by_user == ALICE]
    assert sorted(summary.details["decided"]) == sorted(alice)
    assert set(summary.details["refused"]) == set(refs) - set(alice)


async def test_nothing_selected_is_told_and_nothing_is_stored(system: Slack) -> None:
    slack = system
    assert (await slack.interact(batch_payload(slack, ALICE, "approve", []))).status_code == 200
    await slack.wait_until(lambda: any("Select at least one request" in text
                                       for text in slack.ephemerals_to(ALICE)))
    assert audits(slack, "batch_decided") == []


def test_batch_settings_validate(tmp_path: Path) -> None:
    assert batch_settings(f"sqlite:///{tmp_path / 'x.db'}").routes["strict"].require_reason


async def test_app_home_offers_checkboxes_and_answers_on_home(system: Slack) -> None:
    from tests.slack.test_app_home import check_view, open_home

    slack, engine = system, system.engine
    client = api_client(engine, ["ops"])
    refs = [await ask_tool(engine, client, "ops", f"home_{i}") for i in range(3)]
    await cards_posted(slack, refs)
    view = await open_home(slack, ALICE, "Ev-home-1")
    check_view(view)
    assert offered(view) == refs and "Decide several at once" in json.dumps(view)
    published = len(slack.fake.calls_to("views.publish"))

    response = await slack.interact(batch_payload(slack, ALICE, "approve", refs[:2], home=True))
    assert response.status_code == 200
    await slack.wait_until(lambda: len(slack.fake.calls_to("views.publish")) > published
                           and "Approved 2." in json.dumps(slack.fake.homes[ALICE]),
                           timeout=20, what="Home republished with the answer")
    view = slack.fake.homes[ALICE]
    check_view(view)
    assert offered(view) == refs[2:]
    assert [status(slack, r).status for r in refs] == ["submitted", "submitted", "pending"]
