"""The "Withdraw" item on cards: only the run's starter and ``admins:`` may withdraw; the
agent gets ``cancelled``, every copy is updated, it is audited; anyone else is told."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import select

from bot.settings import Settings
from storage import AuditLog, ClickInbox
from tests.api.conftest import (
    ENCRYPT_KEY,
    FEISHU_ALICE,
    VERIFICATION_TOKEN,
    Door,
    running_door,
)
from tests.fakes.feishu_api import FakeFeishuApi, Message
from tests.fakes.feishu_signing import card_action_event, sign_event
from tests.fakes.slack_api import FakeSlackAPI, validate_blocks
from tests.ops.conftest import ops_config
from tests.ops.test_admin_cli import run_row, start, wait_for
from tests.slack.conftest import ALICE, APPROVALS, STARTER

FEISHU_ADMIN = "ou_admin"


@pytest.fixture
async def ops(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], tmp_path: Path
) -> AsyncIterator[Door]:
    values = ops_config(f"sqlite:///{tmp_path / 'askhuman.db'}")
    values["admins"] = {"feishu": [FEISHU_ADMIN]}
    path = tmp_path / "askhuman.yaml"
    path.write_text(yaml.safe_dump(values))
    settings = Settings.model_validate(yaml.safe_load(path.read_text()))
    async with running_door(fake_slack, fake_feishu, settings) as system:
        yield system


def withdraw_payload(ops: Door, ts: str, user: str) -> dict[str, Any]:
    """What Slack sends when someone picks "Withdraw" in the card's overflow menu."""
    payload = ops.slack.click_payload(ts, "Approve", user)
    menu = next(e for b in ops.slack.card_message(ts).blocks if b["type"] == "actions"
                for e in b["elements"] if e["type"] == "overflow")
    payload["actions"] = [{"type": "overflow", "action_id": menu["action_id"], "block_id": "b",
                           "selected_option": {"text": menu["options"][0]["text"],
                                               "value": menu["options"][0]["value"]},
                           "action_ts": str(time.time())}]
    return payload


async def withdraw_in_feishu(ops: Door, card: Message, ref: str, operator: str) -> Any:
    event = card_action_event(token=VERIFICATION_TOKEN, operator=operator, value={},
                              message_id=card.message_id, chat_id=card.chat_id,
                              app_id=ops.feishu.app_id)
    event["event"]["action"] = {"value": {"r": ref, "w": 1}, "tag": "overflow",
                                "option": "-withdraw"}
    signed = sign_event(event, ENCRYPT_KEY)
    response = await ops.http.post(ops.url + "/feishu/events", content=signed.body,
                                   headers=signed.headers)
    assert response.status_code == 200, response.text
    return response.json()


def audit(ops: Door) -> list[tuple[str, str, str | None]]:
    with ops.database.transaction() as session:
        return [(a.event, a.outcome, a.actor_user)
                for a in session.scalars(select(AuditLog).order_by(AuditLog.id))]


def request_status(ops: Door, ref: str) -> str:
    with ops.database.transaction() as session:
        from storage import HumanRequest
        return session.scalars(select(HumanRequest.status).where(HumanRequest.ref == ref)).one()


async def test_slack_withdraw_by_the_starter_not_by_an_approver(ops: Door) -> None:
    ref, ts = await start(ops)
    card = ops.slack.card_message(ts)
    menu = [e for b in card.blocks if b["type"] == "actions" for e in b["elements"]
            if e["type"] == "overflow"]
    assert len(menu) == 1 and menu[0]["action_id"] == f"ahw:{ref}"
    assert menu[0]["options"][0]["text"]["text"] == "Withdraw" and "confirm" in menu[0]
    assert validate_blocks(card.blocks) is None

    # An approver (not the starter, not an admin) is refused ephemerally; nothing changes.
    response = await ops.slack.interact(withdraw_payload(ops, ts, ALICE))
    assert response.status_code == 200
    await ops.slack.wait_until(lambda: any("may withdraw" in t for t in
                                           ops.slack.ephemerals_to(ALICE)), what="refusal")
    assert request_status(ops, ref) == "pending"
    assert ("withdraw_unauthorized", "refused", ALICE) in audit(ops)

    # The starter withdraws: cancelled, every copy updated, the agent told, audited.
    feishu_card = await ops.feishu_card()
    response = await ops.slack.interact(withdraw_payload(ops, ts, STARTER))
    assert response.status_code == 200
    await wait_for(lambda: request_status(ops, ref) == "cancelled", "the withdrawal")
    assert ("withdrawn", "ok", STARTER) in audit(ops)
    await wait_for(lambda: "Cancelled" in json.dumps(ops.slack.card_message(ts).blocks),
                   "the Slack copy updated")
    await wait_for(lambda: bool(feishu_card.patches), "the Feishu copy patched")
    assert "Withdrawn by" in json.dumps(json.loads(feishu_card.patches[-1]))
    await wait_for(lambda: run_row(ops).status == "succeeded", "the agent resumed")
    assert "not started" in str(run_row(ops).output) and "Withdrawn by" in str(
        run_row(ops).output)
    with ops.database.transaction() as session:  # the click was stored before the ack
        kinds = list(session.scalars(select(ClickInbox.kind)))
    assert kinds.count("withdraw") == 2


async def _learnt(ops: Door, reply: dict[str, Any], open_id: str) -> str:
    """A refused Feishu withdrawal: said in its toast (decided before it), or told right
    after a "received" toast (decided after it)."""
    if reply["toast"]["type"] == "error":
        return str(reply["toast"]["content"])
    assert reply["toast"]["type"] == "info", reply
    return (await ops.wait_told_anywhere(open_id))[-1]


async def test_feishu_withdraw_by_an_admin_not_by_an_approver(ops: Door) -> None:
    ref, ts = await start(ops)
    card = await ops.feishu_card()
    overflow = [e for e in card.card(original=True)["body"]["elements"]
                if e.get("tag") == "overflow"]
    assert overflow and overflow[0]["behaviors"][0]["value"] == {"r": ref, "w": 1}

    refused = await withdraw_in_feishu(ops, card, ref, FEISHU_ALICE)
    assert "may withdraw" in await _learnt(ops, refused, FEISHU_ALICE)
    assert request_status(ops, ref) == "pending"

    done = await withdraw_in_feishu(ops, card, ref, FEISHU_ADMIN)
    assert done["toast"]["type"] in ("success", "info"), done  # taken
    await wait_for(lambda: request_status(ops, ref) == "cancelled", "the withdrawal")
    assert ("withdrawn", "ok", FEISHU_ADMIN) in audit(ops)
    await wait_for(lambda: "Cancelled" in json.dumps(
        ops.slack.card_message(ts, APPROVALS).blocks), "the Slack copy updated")
    await wait_for(lambda: bool(card.patches), "the Feishu copy patched")
    await wait_for(lambda: run_row(ops).status == "succeeded", "the agent resumed")

    # A second withdrawal is told it is too late.
    again = await withdraw_in_feishu(ops, card, ref, FEISHU_ADMIN)
    told = (await _learnt(ops, again, FEISHU_ADMIN)).lower()
    assert "already" in told or "cancelled" in told, told


async def test_withdraw_of_an_unknown_ref_is_refused(ops: Door) -> None:
    _ref, ts = await start(ops)
    payload = withdraw_payload(ops, ts, STARTER)
    payload["actions"][0]["action_id"] = "ahw:nosuchref"
    response = await ops.slack.interact(payload)
    assert response.status_code == 200
    await ops.slack.wait_until(lambda: ops.slack.ephemerals_to(STARTER), what="a reply")
    assert ("withdraw_unknown_ref", "refused", STARTER) in audit(ops)
