"""Slash-command sub-commands, app mentions, and Events API retry de-duplication."""

from __future__ import annotations

import asyncio

from sqlalchemy import func, select

from storage import Run
from tests.slack.conftest import ALICE, MALLORY, ORIGIN, Slack


def _runs(slack: Slack) -> int:
    with slack.database.transaction() as session:
        return int(session.scalar(select(func.count()).select_from(Run)) or 0)


async def test_help_is_in_the_ack(slack: Slack) -> None:
    response = await slack.command("help")
    assert response.status_code == 200
    assert "/askhuman run" in response.json()["text"]
    assert "pending" in (await slack.command("")).json()["text"]
    assert "don't know" in (await slack.command("frobnicate")).json()["text"]


async def test_run_without_prompt_shows_usage(slack: Slack) -> None:
    response = await slack.command("run deploy")
    assert "Usage" in response.json()["text"]
    assert _runs(slack) == 0


async def test_unknown_agent_is_explained_in_thread(slack: Slack) -> None:
    await slack.command("run nosuchagent do it")
    await slack.wait_until(
        lambda: any(m.thread_ts for m in slack.fake.messages.values()), what="reply"
    )
    reply = next(m for m in slack.fake.messages.values() if m.thread_ts)
    assert "Unknown agent" in reply.text and "deploy" in reply.text


async def test_pending_lists_only_answerable_requests(slack: Slack) -> None:
    await slack.command("run deploy ship v4.0.0")
    await slack.wait_for_card()
    await slack.command("pending", user=ALICE)
    await slack.wait_until(lambda: slack.fake.response_url_calls, what="respond")
    alice = slack.fake.response_url_calls[-1]
    assert alice["response_type"] == "ephemeral"
    assert "Deploy v4.0.0?" in alice["text"] and "1 open request" in alice["text"]
    await slack.command("pending", user=MALLORY)
    await slack.wait_until(lambda: len(slack.fake.response_url_calls) == 2, what="respond")
    assert "Nothing is waiting" in slack.fake.response_url_calls[-1]["text"]


async def test_app_mention_starts_a_run_in_its_thread_once(slack: Slack) -> None:
    event = {
        "type": "app_mention",
        "user": ALICE,
        "text": "<@UBOT> deploy: ship v5.0.0 <!channel>",
        "ts": "1700000000.000100",
        "channel": ORIGIN,
        "event_ts": "1700000000.000100",
    }
    first = await slack.event(event, "Ev0001")
    retry = await slack.event(event, "Ev0001", retry=1)
    assert first.status_code == 200 and retry.status_code == 200
    await slack.wait_for_card()
    await asyncio.sleep(0.3)
    assert _runs(slack) == 1
    with slack.database.transaction() as session:
        run = session.scalars(select(Run)).one()
        assert (run.started_by_user, run.started_by_name) == (ALICE, "user-u0alice")
        assert (run.origin_channel, run.origin_thread) == (ORIGIN, event["ts"])
    # a fresh event id is a new mention
    await slack.event({**event, "ts": "1700000000.000200"}, "Ev0002", retry=2)
    await slack.wait_until(lambda: _runs(slack) == 2, what="second run")


async def test_mention_without_agent_gets_help(slack: Slack) -> None:
    event = {"type": "app_mention", "user": ALICE, "text": "<@UBOT>", "ts": "1.2",
             "channel": ORIGIN}
    await slack.event(event, "Ev0003")
    await slack.wait_until(lambda: slack.fake.calls_to("chat.postMessage"), what="help")
    assert "Mention me" in slack.fake.calls_to("chat.postMessage")[0].body["text"]
    assert _runs(slack) == 0
