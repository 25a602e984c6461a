"""The happy path over real HTTP: slash command → card → signed click → update → resume."""

from __future__ import annotations

import time

from slack_sdk.models.blocks import Block

from tests.fakes.slack_api import validate_blocks
from tests.slack.conftest import ALICE, APPROVALS, ORIGIN, STARTER, Slack


async def test_slash_command_to_final_answer(slack: Slack) -> None:
    # 1) a slash command starts a run of the scripted deploy agent
    response = await slack.command("run deploy ship v1.2.3")
    assert response.status_code == 200

    # 2) a Block Kit request is posted to the route's channel and passes slack-sdk validation
    ts = await slack.wait_for_card()
    card = slack.card_message(ts)
    assert validate_blocks(card.blocks) is None
    assert all(Block.parse(b) is not None for b in card.blocks)
    assert "Approve" in slack.buttons(ts) and "Reject" in slack.buttons(ts)
    started = next(
        c for c in slack.fake.calls_to("chat.postMessage") if c.body.get("channel") == ORIGIN
    )
    assert f"<@{STARTER}>" in started.body["text"]

    # 3) a signed block_actions click from an allowed user, with state.values, is acked fast
    t0 = time.perf_counter()
    click = await slack.interact(slack.click_payload(ts, "Approve", ALICE, environment="o1"))
    assert click.status_code == 200
    assert time.perf_counter() - t0 < 1.0

    # 4) chat.update shows the decision to everyone
    await slack.wait_until(lambda: slack.fake.calls_to("chat.update"), what="chat.update")
    updated = slack.card_message(ts)
    assert validate_blocks(updated.blocks) is None
    assert not any(b["type"] == "actions" for b in updated.blocks)
    assert f"<@{ALICE}>" in str(updated.blocks)

    # 5) the run resumes and the final answer is posted in the thread where it started
    root_ts = started.body.get("ts") or next(
        m.ts for m in slack.fake.messages.values() if m.channel == ORIGIN and m.thread_ts is None
    )
    await slack.wait_until(
        lambda: slack.fake.thread_replies(ORIGIN, root_ts), what="final answer in thread"
    )
    final = slack.fake.thread_replies(ORIGIN, root_ts)[-1]
    assert "Deployed v1.2.3 to production" in final.text

    # 6) the database shows the audit trail
    row = slack.request_row()
    assert row.status == "submitted" and row.decided_by_user == ALICE
    events = [event for event, _outcome, _actor in slack.audit()]
    for expected in ("run_started", "request_created", "delivered", "decided", "resumed",
                     "run_succeeded"):
        assert expected in events, events
    assert ("decided", "ok", ALICE) in [(e, o, a) for e, o, a in slack.audit() if e == "decided"]
    assert not slack.ephemerals_to(ALICE)
    assert APPROVALS in {c.body.get("channel") for c in slack.fake.calls_to("chat.update")}
