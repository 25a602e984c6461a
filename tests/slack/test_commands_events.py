"""Slash-command sub-commands, app mentions, and Events API retry de-duplication."""

from __future__ import annotations

import asyncio

from sqlalchemy import func, select

from storage import Run
from tests.slack.conftest import ALICE, MALLORY, ORIGIN, STARTER, Slack


def _runs(slack: Slack) -> int:
    with slack.database.transaction() as session:
        return int(session.scalar(select(func.count()).select_from(Run)) or 0)


async def _reply_to(slack: Slack, text: str, user: str = STARTER) -> str:
    """The ephemeral ``response_url`` reply to one command."""
    before = len(slack.fake.response_url_calls)
    response = await slack.command(text, user=user)
    assert response.status_code == 200
    await slack.wait_until(lambda: len(slack.fake.response_url_calls) > before, what="reply")
    reply = slack.fake.response_url_calls[before]
    assert reply["response_type"] == "ephemeral"
    return str(reply["text"])


async def test_help_lists_only_the_agents_the_asker_may_start(slack: Slack) -> None:
    mine = await _reply_to(slack, "help")
    assert "/askhuman run" in mine and "Agents you may start:* `deploy`" in mine
    assert "pending" in await _reply_to(slack, "")
    assert "don't know" in await _reply_to(slack, "frobnicate")
    theirs = await _reply_to(slack, "help", user=MALLORY)
    assert "deploy" not in theirs and "You may not start any agent" in theirs


async def test_run_without_prompt_shows_usage(slack: Slack) -> None:
    response = await slack.command("run deploy")
    assert "Usage" in response.json()["text"]
    assert _runs(slack) == 0


async def test_unknown_agent_lists_only_startable_agents_to_the_asker(slack: Slack) -> None:
    mine = await _reply_to(slack, "run nosuchagent do it")
    assert mine == "Unknown agent 'nosuchagent'. Agents you may start: deploy."
    theirs = await _reply_to(slack, "run nosuchagent do it", user=MALLORY)
    assert "deploy" not in theirs and "you may not start any agent" in theirs
    assert not slack.fake.calls_to("chat.postMessage")  # nothing visible in the channel
    assert _runs(slack) == 0


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
        "user": STARTER,
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
        assert (run.started_by_user, run.started_by_name) == (STARTER, "user-u0starter")
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
