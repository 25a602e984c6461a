"""Slack trouble: 429 and 5xx are retried; permanent failures resolve ``unavailable``."""

from __future__ import annotations

import time

from sqlalchemy import select

from storage import AuditLog
from tests.slack.conftest import ALICE, APPROVALS, ORIGIN, Slack


def _root_ts(slack: Slack) -> str:
    return next(
        m.ts for m in slack.fake.messages.values() if m.channel == ORIGIN and m.thread_ts is None
    )


async def test_rate_limited_chat_update_is_retried(slack: Slack) -> None:
    assert (await slack.command("run deploy ship v3.0.0")).status_code == 200
    ts = await slack.wait_for_card()
    slack.fake.fail("chat.update", status=429, retry_after=1, times=1)
    t0 = time.monotonic()
    await slack.interact(slack.click_payload(ts, "Approve", ALICE))
    await slack.wait_until(lambda: slack.card_message(ts).versions > 1, what="card updated")
    calls = slack.fake.calls_to("chat.update")
    assert len(calls) == 2
    assert calls[1].at - calls[0].at >= 1.0  # Retry-After respected
    assert time.monotonic() - t0 >= 1.0
    assert not any(b["type"] == "actions" for b in slack.card_message(ts).blocks)


async def test_server_error_on_post_message_is_retried(slack: Slack) -> None:
    slack.fake.fail("chat.postMessage", status=503, times=1)
    slack.fake.fail("chat.postMessage", status=500, times=1)
    assert (await slack.command("run deploy ship v3.1.0")).status_code == 200
    await slack.wait_for_card()
    methods = [c.method for c in slack.fake.calls_to("chat.postMessage")]
    assert len(methods) >= 4  # 2 failures + started message + card
    assert slack.request_row().status == "pending"


async def test_permanent_delivery_failure_resolves_unavailable(slack: Slack) -> None:
    slack.fake.missing_channels.add(APPROVALS)
    assert (await slack.command("run deploy ship v3.2.0")).status_code == 200
    await slack.wait_until(
        lambda: any(m.thread_ts for m in slack.fake.messages.values() if m.channel == ORIGIN),
        what="the agent's answer in thread",
    )
    row = slack.request_row()
    assert row.status == "unavailable"
    reply = slack.fake.thread_replies(ORIGIN, _root_ts(slack))[-1]
    # People read what happened in words; the code stays in the audit (and the log).
    assert "not started" in reply.text and "That channel doesn't exist" in reply.text
    assert "channel_not_found" not in reply.text
    assert "channel_not_found" not in (row.result or {})["message"]
    events = [e for e, _o, _a in slack.audit()]
    assert "unavailable" in events and "resumed" in events
    with slack.database.transaction() as session:
        failed = session.scalars(select(AuditLog).where(AuditLog.event == "outbox_failed")).one()
        assert "channel_not_found" in (failed.reason or "")


async def test_exhausted_rate_limit_on_delivery_is_permanent(slack: Slack) -> None:
    slack.fake.fail("chat.postMessage", status=429, retry_after=0, times=10)
    slack.fake.missing_channels.clear()
    response = await slack.command("run deploy ship v3.3.0")
    assert response.status_code == 200
    # the started message itself cannot be posted: the user is told ephemerally instead
    await slack.wait_until(lambda: slack.fake.response_url_calls, timeout=15, what="respond")
    told = slack.fake.response_url_calls[0]["text"]
    assert told == ("I could not post the run's first message here (Slack is rate limiting "
                    "askhuman), so the run had nowhere to report; nothing ran.")
