"""Delegation (out of office): a delegate answers as "Bob for Alice"; an expired or
revoked delegation is refused with a clear message; own runs and self-approval stay
refused; the ``askhuman delegate`` CLI (real engine, SQLite and PostgreSQL)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from sqlalchemy import select
from typer.testing import CliRunner

from bot.cli import app
from bot.engine import Identity, delegation, delegation_chat
from renderers.text import render_text
from storage import AuditLog
from tests.engine.helpers import ORIGIN, STARTER, T0, alice
from tests.engine.test_reminders import ANSWER, audits, build, ops_route, row

BOB = Identity("slack", "U_BOB", "Bob")
ALICE = Identity("slack", "U_ALICE", "Alice")


async def _delegate(engine: object, frm: Identity, to: Identity, until: str) -> str:
    return str(await engine.delegations.delegate(frm, to, until))


async def test_a_delegate_answers_for_the_delegator(db_url: str) -> None:
    engine, adapter, _clock = build(db_url, ops_route())
    said = await _delegate(engine, ALICE, BOB, "2025-03-10")
    assert said.startswith("Until 2025-03-10 00:00 UTC, Bob may answer"), said
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    assert [c.ref for c in await engine.pending_for(BOB)] == [ref]  # what Bob covers
    answer = await engine.respond(ref, BOB, "approve", ANSWER)
    assert answer.outcome == "accepted", answer.message
    request = row(engine)
    assert (request.decided_by_user, request.decided_via) == ("U_ALICE", "U_BOB")
    assert request.decided_by_name == "Bob for Alice"
    card = await engine.card(ref)
    assert card is not None and "Bob for Alice" in render_text(card)
    with engine.db.transaction() as s:
        decided = s.scalars(select(AuditLog).where(AuditLog.event == "decided")).one()
        assert decided.actor_user == "U_ALICE"
        assert decided.details["delegate"] == "U_BOB"
        assert decided.details["acting_as"] == "Bob for Alice"
    assert audits(engine, "delegation_added") == 1


async def test_an_expired_delegation_is_refused_clearly(db_url: str) -> None:
    engine, adapter, clock = build(db_url, ops_route(timeout="3d"))
    await _delegate(engine, ALICE, BOB, "2025-03-02")  # T0 is 2025-03-01 12:00
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    clock.advance(12 * 3600)  # exactly at the end: over
    refused = await engine.respond(ref, BOB, "approve", ANSWER)
    assert refused.outcome == "rejected"
    assert refused.message == ("Your delegation from Alice ended at 2025-03-02 00:00 UTC, so "
                               "you can no longer answer for them.")
    assert row(engine).status == "pending"
    assert (await engine.respond(ref, alice(), "approve", ANSWER)).outcome == "accepted"


async def test_revoked_delegation_and_strangers(db_url: str) -> None:
    engine, adapter, _clock = build(db_url, ops_route())
    await _delegate(engine, ALICE, BOB, "2025-04-01")
    assert str(await engine.delegations.revoke(ALICE, None)).startswith("Revoked 1")
    assert str(await engine.delegations.revoke(ALICE, None)).startswith("You have no")
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    assert await engine.pending_for(BOB) == []
    refused = await engine.respond(ref, BOB, "approve", ANSWER)
    assert refused.message == ("Your delegation from Alice was revoked, so you can no longer "
                               "answer for them.")
    mallory = Identity("slack", "U_MALLORY", "Mallory")
    assert (await engine.respond(ref, mallory, "approve", ANSWER)).message == \
        "You are not allowed to answer this request."


async def test_no_delegate_answers_their_own_run_or_self_approves(db_url: str) -> None:
    engine, adapter, _clock = build(db_url, ops_route())
    await _delegate(engine, ALICE, STARTER, "2025-04-01")  # the starter covers for Alice
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    refused = await engine.respond(ref, STARTER, "approve", ANSWER)
    assert refused.outcome == "rejected" and refused.words == delegation.OWN_RUN
    # Alice starts a run herself: her delegate may not approve it for her (self-approval)
    engine2, adapter2, _ = build(db_url, ops_route())
    await _delegate(engine2, ALICE, BOB, "2025-04-01")
    engine2.settings.agents["deploy"].starters.slack.users.append("U_ALICE")  # type: ignore
    await engine2.start_run("deploy", "Deploy v2", ALICE, ORIGIN)
    ref2 = adapter2.delivered[-1][0].ref
    refused2 = await engine2.respond(ref2, BOB, "approve", ANSWER)
    assert refused2.outcome == "rejected"
    assert refused2.message == "You started this run, so you cannot approve it yourself."


async def test_one_person_one_vote_with_a_delegate(db_url: str) -> None:
    route = ops_route(quorum=2)  # two listed approvers, so a quorum of 2 can be met
    route["slack"] = {"channel": "C_OPS", "approvers": {"users": ["U_ALICE", "U_DAVE"]}}
    engine, adapter, _clock = build(db_url, route)
    await _delegate(engine, ALICE, BOB, "2025-04-01")
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    assert (await engine.respond(ref, ALICE, "approve", ANSWER)).outcome == "recorded"
    again = await engine.respond(ref, BOB, "approve", ANSWER)
    assert again.outcome == "rejected" and "already recorded" in again.message


def test_chat_command_parsing() -> None:
    parse = delegation_chat.parse_chat
    assert parse("") == delegation_chat.ChatCommand("list")
    assert parse("<@U1|bob> until 2026-12-24") == delegation_chat.ChatCommand(
        "add", "<@U1|bob>", "2026-12-24")
    assert parse("revoke <@U1>") == delegation_chat.ChatCommand("revoke", "<@U1>")
    assert parse("bob tomorrow please").verb == "usage"


async def test_bad_dates_and_self_delegation_are_explained(db_url: str) -> None:
    engine, _adapter, _clock = build(db_url, ops_route())
    assert "not a date" in await _delegate(engine, ALICE, BOB, "christmas")
    assert "not in the future" in await _delegate(engine, ALICE, BOB, "2025-02-01")
    assert "yourself" in await _delegate(engine, ALICE, ALICE, "2025-04-01")


def test_cli_add_list_revoke(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'a.db'}"
    runner = CliRunner()
    assert runner.invoke(app, ["db", "upgrade", "--database", db]).exit_code == 0
    until = (dt.datetime.now(dt.UTC) + dt.timedelta(days=30)).date().isoformat()
    added = runner.invoke(app, ["delegate", "add", "--from", "U_ALICE", "--to", "U_BOB",
                                "--until", until, "--database", db])
    assert added.exit_code == 0, added.output
    assert f"U_BOB answers for U_ALICE on slack until {until}T00:00:00Z" in added.output
    listed = runner.invoke(app, ["delegate", "list", "--json", "--database", db])
    [entry] = json.loads(listed.output)
    assert (entry["from"], entry["to"], entry["state"]) == ("U_ALICE", "U_BOB", "active")
    bad = runner.invoke(app, ["delegate", "add", "--from", "U_ALICE", "--to", "U_BOB",
                              "--until", "soon", "--database", db])
    assert bad.exit_code == 2 and "is not a date" in bad.output
    assert runner.invoke(app, ["delegate", "revoke", "--from", "U_ALICE",
                               "--database", db]).exit_code == 0
    again = runner.invoke(app, ["delegate", "revoke", "--from", "U_ALICE", "--database", db])
    assert again.exit_code == 1 and "no active delegation" in again.output
    ended = runner.invoke(app, ["delegate", "list", "--all", "--json", "--database", db])
    assert json.loads(ended.output)[0]["state"] == "revoked"


_ = T0
