"""Approval policy end to end: the served app, signed clicks from the Slack and Feishu
fakes, one request whose card is on both platforms.

The route ``ops`` posts to Slack (approvers Alice and Bob) and Feishu (ou_alice,
ou_bob); each test adds its policy keys (quorum, veto, require, require_reason, people).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import select

from bot.reload import reload_into
from bot.settings import load_settings
from storage import AuditLog, HumanRequest, Run
from tests.api.conftest import FEISHU_ALICE, Door, running_door
from tests.fakes.feishu_api import FakeFeishuApi, Message
from tests.fakes.slack_api import FakeSlackAPI
from tests.ops.conftest import ops_config
from tests.ops.test_admin_cli import as_json, cli, start, wait_for
from tests.slack.conftest import ALICE, BOB

FEISHU_BOB = "ou_bob"


def write_config(tmp_path: Path, **route: Any) -> Path:
    people = route.pop("people", None)
    values = ops_config(f"sqlite:///{tmp_path / 'askhuman.db'}", **route)
    ops = values["routes"]["ops"]
    ops["slack"]["approvers"]["users"].append(BOB)
    ops["feishu"]["approvers"]["users"].append(FEISHU_BOB)
    if people:
        values["people"] = people
    path = tmp_path / "askhuman.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


@asynccontextmanager
async def served(fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str],
                 path: Path) -> AsyncIterator[Door]:
    fake_slack.add_users([BOB])
    async with running_door(fake_slack, fake_feishu, load_settings(path)) as door:
        yield door


def request_row(ops: Door) -> HumanRequest:
    with ops.database.transaction() as session:
        row = session.scalars(select(HumanRequest)).one()
        session.expunge(row)
        return row


def run_row(ops: Door) -> Run:
    with ops.database.transaction() as session:
        row = session.scalars(select(Run)).one()
        session.expunge(row)
        return row


def slack_text(ops: Door, ts: str) -> str:
    return json.dumps(ops.slack.card_message(ts).blocks, ensure_ascii=False)


def feishu_text(card: Message) -> str:
    return json.dumps(card.card(), ensure_ascii=False)


async def clicked_in_slack(ops: Door, ts: str, label: str, user: str,
                           reason: str | None = "lgtm") -> None:
    payload = ops.slack.click_payload(ts, label, user)
    for block in ops.slack.card_message(ts).blocks:
        if block["type"] == "input" and block["label"]["text"] == "Reason":
            state = payload["state"]["values"][block["block_id"]]
            state[block["element"]["action_id"]]["value"] = reason
    response = await ops.slack.interact(payload)
    assert response.status_code == 200, response.text


async def test_slack_and_feishu_votes_reach_one_quorum_and_every_copy_shows_progress(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], tmp_path: Path
) -> None:
    async with served(fake_slack, fake_feishu, write_config(tmp_path, quorum=2)) as ops:
        ref, ts = await start(ops)
        card = await ops.feishu_card()
        await clicked_in_slack(ops, ts, "Approve", ALICE)
        await wait_for(lambda: "1 of 2 approvals" in feishu_text(card)
                       and "1 of 2 approvals" in slack_text(ops, ts), "both copies")
        assert "1 of 2 approvals: u0alice (Approve)" in slack_text(ops, ts)
        assert "1 of 2 approvals: u0alice (Approve)" in feishu_text(card)
        assert request_row(ops).status == "pending"

        # The same request on Feishu. Nobody mapped ou_alice to U0ALICE under people,
        # so this identity counts as a second person and completes the quorum.
        ops.feishu_taken(await ops.click_feishu(card, ref, "approve", operator=FEISHU_ALICE))
        await wait_for(lambda: run_row(ops).status == "succeeded", "the run to finish")
        row = request_row(ops)
        assert row.status == "submitted" and row.action_id == "approve"
        assert row.result is not None and row.result["message"].startswith(
            "Decided. Responses: u0alice (Approve), ou_alice (Approve).")
        await wait_for(lambda: "Answered" in feishu_text(card) and "Answered" in
                       slack_text(ops, ts), "both copies to say Answered")


async def test_a_reject_on_feishu_vetoes_a_quorum_started_on_slack(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], tmp_path: Path
) -> None:
    async with served(fake_slack, fake_feishu, write_config(tmp_path, quorum=2)) as ops:
        ref, ts = await start(ops)
        card = await ops.feishu_card()
        await clicked_in_slack(ops, ts, "Approve", ALICE)
        await wait_for(lambda: "1 of 2" in feishu_text(card), "the progress on Feishu")
        ops.feishu_taken(await ops.click_feishu(card, ref, "reject", operator=FEISHU_BOB))
        await wait_for(lambda: request_row(ops).status == "submitted", "the veto")
        row = request_row(ops)
        assert row.status == "submitted" and row.action_id == "reject"
        assert row.result is not None and row.result["message"].startswith(
            "Vetoed by ") and "u0alice (Approve)" in row.result["message"]
        await wait_for(lambda: run_row(ops).status == "succeeded", "the run to finish")


async def test_a_mapped_person_counts_once_across_platforms(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], tmp_path: Path
) -> None:
    people = {"alice": {"slack": ALICE, "feishu": "alice@example.com"}}
    path = write_config(tmp_path, quorum=2, people=people)
    feishu, _ = fake_feishu
    feishu.users["alice@example.com"] = FEISHU_ALICE
    async with served(fake_slack, fake_feishu, path) as ops:
        ref, ts = await start(ops)
        card = await ops.feishu_card()
        await clicked_in_slack(ops, ts, "Approve", ALICE)
        await wait_for(lambda: "1 of 2" in feishu_text(card), "the progress on Feishu")
        again = await ops.click_feishu(card, ref, "approve", operator=FEISHU_ALICE)
        told = await ops.feishu_refusal(again, FEISHU_ALICE)
        assert told.endswith("You already answered (approve) on Slack; waiting for the "
                             "other approvers."), told
        assert request_row(ops).status == "pending"
        # Bob is another person: his vote decides.
        ops.feishu_taken(await ops.click_feishu(card, ref, "approve", operator=FEISHU_BOB))
        await wait_for(lambda: request_row(ops).status == "submitted", "Bob's vote to decide")


async def test_sign_off_per_slack_group_and_the_card_shows_who_signed(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], tmp_path: Path
) -> None:
    fake_slack.group_members.update({"S0SEC": [ALICE, BOB], "S0OPS": [ALICE]})
    path = write_config(tmp_path, require=[{"group": "S0SEC", "name": "Security"},
                                           {"group": "S0OPS", "name": "Ops"}])
    async with served(fake_slack, fake_feishu, path) as ops:
        ref, ts = await start(ops)
        card = await ops.feishu_card()
        await clicked_in_slack(ops, ts, "Approve", ALICE)
        assert "Sign-off: Security (waiting), Ops (waiting)" in slack_text(ops, ts)
        await wait_for(lambda: "\u2713" in feishu_text(card)
                       and "\u2713" in slack_text(ops, ts), "the sign-off line")
        text = slack_text(ops, ts)
        assert "1 of 2 approvals" in text and "(waiting)" in text and "\u2713" in text
        assert request_row(ops).status == "pending"  # Alice signs for one group only
        # An approver in no group adds a vote but no sign-off.
        await ops.click_feishu(card, ref, "approve", operator=FEISHU_BOB)
        assert request_row(ops).status == "pending"
        await clicked_in_slack(ops, ts, "Approve", BOB)
        await wait_for(lambda: request_row(ops).status == "submitted", "the sign-off")
        await wait_for(lambda: "Security \u2713" not in slack_text(ops, ts)
                       and "Answered" in slack_text(ops, ts), "the Slack card to be decided")


async def test_a_reload_does_not_change_an_open_requests_rules(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], tmp_path: Path
) -> None:
    path = write_config(tmp_path, quorum=2)
    async with served(fake_slack, fake_feishu, path) as ops:
        ref, ts = await start(ops)
        # The admin lowers the quorum to 1 and removes Bob; the bot reloads.
        values = yaml.safe_load(path.read_text())
        values["routes"]["ops"]["quorum"] = 1
        values["routes"]["ops"]["slack"]["approvers"]["users"] = [ALICE]
        path.write_text(yaml.safe_dump(values))
        assert reload_into(ops.engine, path)
        assert ops.engine.settings.routes["ops"].quorum == 1

        await clicked_in_slack(ops, ts, "Approve", ALICE)
        await wait_for(lambda: "1 of 2" in slack_text(ops, ts), "the Slack progress")
        assert request_row(ops).status == "pending"  # still the frozen quorum of 2
        shown = as_json(await cli("requests", "show", ref, "--json", "--config", str(path)))
        assert shown["policy"]["source"] == "frozen when the request was raised"
        assert shown["policy"]["quorum"] == 2 and shown["policy"]["veto"] is True
        words = await cli("requests", "show", ref, "--config", str(path))
        assert "quorum 2, veto on" in words.stdout
        await clicked_in_slack(ops, ts, "Approve", BOB)  # Bob is still an approver here
        await wait_for(lambda: request_row(ops).status == "submitted", "the decision")


async def test_a_missing_reason_is_refused_on_slack_and_feishu_and_nothing_is_lost(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], tmp_path: Path
) -> None:
    path = write_config(tmp_path, require_reason=["reject"])
    async with served(fake_slack, fake_feishu, path) as ops:
        ref, ts = await start(ops)
        card = await ops.feishu_card()
        assert "f_reason" in feishu_text(card) and '"Reason"' in slack_text(ops, ts)
        await clicked_in_slack(ops, ts, "Reject", ALICE, reason=None)
        await wait_for(lambda: any("needs a reason" in t for t in ops.slack.ephemerals_to(
            ALICE)), "the ephemeral refusal")
        refused = await ops.click_feishu(card, ref, "reject", operator=FEISHU_ALICE,
                                         form={"f_environment": "o1"})
        told = await ops.feishu_refusal(refused, FEISHU_ALICE)
        assert "\u201cReject\u201d needs a reason" in told, told
        assert request_row(ops).status == "pending"

        ops.feishu_taken(await ops.click_feishu(
            card, ref, "reject", operator=FEISHU_ALICE,
            form={"f_environment": "o1", "f_reason": "not during the freeze"}))
        await wait_for(lambda: run_row(ops).status == "succeeded", "the run to finish")
        row = request_row(ops)
        assert row.result is not None
        assert row.result["values"]["reason"] == "not during the freeze"
        with ops.database.transaction() as session:
            events = {a.event: a.reason for a in session.scalars(select(AuditLog))}
        assert events["decided"] == "not during the freeze"
        assert "respond_reason_missing" in events
