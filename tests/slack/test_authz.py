"""Authorization against the served app: starters, Slack Connect guests, and directory
lookups that fail after their cache expired (issue 9, items 5-7)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from bot.engine.authz import EXTERNAL, UNVERIFIED
from bot.platforms.slack.directory import SlackDirectory
from bot.settings import Settings, Starters
from storage import AuditLog, HumanRequest, Run
from tests.fakes.slack_api import FakeSlackAPI
from tests.slack.conftest import (
    ALICE,
    APPROVALS,
    BOB,
    CAROL,
    GROUP,
    MALLORY,
    ORIGIN,
    STARTER,
    Slack,
    make_settings,
    running_system,
)

OTHER_TEAM = "T0PARTNER"
EVE = "U0EVE"  # a Slack Connect guest from another organisation, member of the channel


def _runs(slack: Slack) -> int:
    with slack.database.transaction() as session:
        return int(session.scalar(select(func.count()).select_from(Run)) or 0)


def _statuses(slack: Slack) -> list[str]:
    with slack.database.transaction() as session:
        return list(session.scalars(select(HumanRequest.status).order_by(HumanRequest.id)))


def _refused(slack: Slack, event: str) -> list[tuple[str | None, str | None, dict[str, Any]]]:
    """One entry per refused attempt (repeats share a row with a count of ``occurrences``)."""
    with slack.database.transaction() as session:
        rows = session.scalars(select(AuditLog).where(AuditLog.event == event,
                                                      AuditLog.outcome == "refused"))
        return [(r.actor_user, r.reason, dict(r.details))
                for r in rows for _ in range(r.occurrences)]


def _directory(slack: Slack) -> SlackDirectory:
    directory = slack.engine.platforms.directory("slack")
    assert isinstance(directory, SlackDirectory)
    return directory


async def _recorded(slack: Slack, ts: str) -> str:
    """Wait until the engine has recorded the card's delivery (channel members count
    only where a copy was delivered), then return its ts."""
    for _ in range(500):
        if await slack.engine.find_by_message("slack", ts):
            return ts
        await asyncio.sleep(0.02)
    raise AssertionError(f"delivery of {ts} never recorded")


async def _card(slack: Slack, text: str, user: str = STARTER) -> str:
    before = {m.ts for m in slack.fake.messages.values() if m.channel == APPROVALS}
    await slack.command(text, user=user)
    await slack.wait_until(lambda: any(m.channel == APPROVALS and m.blocks and m.ts not in before
                                       for m in list(slack.fake.messages.values())),
                           what="card")
    ts = next(m.ts for m in list(slack.fake.messages.values())
              if m.channel == APPROVALS and m.blocks and m.ts not in before)
    return await _recorded(slack, ts)


async def _two_cards(slack: Slack) -> tuple[str, str]:
    return await _card(slack, "run deploy ship v1"), await _card(slack, "run deploy ship v2")


async def _click(slack: Slack, ts: str, user: str, team: str | None = None) -> None:
    payload = slack.click_payload(ts, "Approve", user)
    if team is not None:
        payload["user"]["team_id"] = team
    before = len(slack.ephemerals_to(user))
    assert (await slack.interact(payload)).status_code == 200
    await slack.wait_until(lambda: len(slack.ephemerals_to(user)) > before
                           or slack.card_message(ts).versions > 1, what="click outcome")


# ------------------------------------------------------------------ directory: one rule


async def test_group_lookup_failing_after_ttl_refuses_and_decides_nothing(slack: Slack) -> None:
    now = [0.0]
    _directory(slack).clock = lambda: now[0]
    first, second = await _two_cards(slack)
    await _click(slack, first, MALLORY)  # loads (and caches) the group and the channel
    assert "not allowed" in slack.ephemerals_to(MALLORY)[-1]
    slack.fake.group_members[GROUP] = []  # Bob leaves the group...
    slack.fake.fail("usergroups.users.list", status=429, retry_after=0, times=4)
    now[0] = 30.0  # ...but the cached list is still fresh: it is used, nobody is asked
    await _click(slack, first, BOB)
    assert _statuses(slack) == ["submitted", "pending"]
    assert len(slack.fake.calls_to("usergroups.users.list")) == 1

    now[0] = 61.0  # expired, and Slack rate limits the lookup: refuse, never reuse it
    await _click(slack, second, BOB)
    assert slack.ephemerals_to(BOB)[-1] == str(UNVERIFIED)
    assert _statuses(slack) == ["submitted", "pending"]
    assert (BOB, str(UNVERIFIED)) in [(u, r) for u, r, _ in _refused(slack, "respond_unauthorized")]
    assert len(slack.fake.calls_to("usergroups.users.list")) == 5  # 1 + (1 try + 3 retries)

    await _click(slack, second, BOB)  # Slack answers again: Bob is no longer in the group
    assert "not allowed" in slack.ephemerals_to(BOB)[-1]
    assert _statuses(slack) == ["submitted", "pending"]


# ------------------------------------------------------------------ Slack Connect


@pytest.fixture
def shared_channel(fake_slack: FakeSlackAPI) -> FakeSlackAPI:
    fake_slack.add_users([EVE], team=OTHER_TEAM)
    fake_slack.channel_members[APPROVALS] = [CAROL, EVE, "UBOT"]
    return fake_slack


@pytest.fixture
async def guests_allowed(shared_channel: FakeSlackAPI, tmp_path: Path) -> AsyncIterator[Slack]:
    settings = make_settings(f"sqlite:///{tmp_path / 'ext.db'}", allow_external=True)
    async with running_system(shared_channel, settings) as system:
        yield system


async def test_slack_connect_guest_is_not_a_channel_member(
    shared_channel: FakeSlackAPI, slack: Slack
) -> None:
    ts = await _card(slack, "run deploy ship v3")
    await _click(slack, ts, EVE, team=OTHER_TEAM)
    assert slack.ephemerals_to(EVE)[-1] == str(EXTERNAL)
    assert _statuses(slack) == ["pending"]
    assert [(u, r) for u, r, _ in _refused(slack, "respond_unauthorized")] == [(EVE, str(EXTERNAL))]
    # A click without a team (never sent by Slack) is looked up: Eve is still a guest.
    await _click(slack, ts, EVE, team="")
    assert _statuses(slack) == ["pending"]
    # A listed approver from another team is the admin's explicit choice.
    await _click(slack, ts, ALICE, team=OTHER_TEAM)
    assert _statuses(slack) == ["submitted"]


async def test_slack_connect_guest_may_answer_where_the_route_allows_it(
    guests_allowed: Slack,
) -> None:
    slack = guests_allowed
    ts = await _card(slack, "run deploy ship v4")
    await _click(slack, ts, EVE, team=OTHER_TEAM)
    assert _statuses(slack) == ["submitted"]


async def test_enterprise_grid_colleague_is_not_external(
    shared_channel: FakeSlackAPI, slack: Slack
) -> None:
    slack.fake.enterprise_id = "E0ORG"
    ts = await _card(slack, "run deploy ship v5")
    payload = slack.click_payload(ts, "Approve", CAROL)
    payload["user"]["team_id"] = "T0SISTER"  # another workspace of the same Grid org
    payload["team"] = {"id": "T0SISTER", "enterprise_id": "E0ORG"}
    assert (await slack.interact(payload)).status_code == 200
    await slack.wait_until(lambda: _statuses(slack) == ["submitted"], what="decision")


# ------------------------------------------------------------------ starters


async def test_stranger_cannot_start_deploy_by_command_or_mention(slack: Slack) -> None:
    response = await slack.command("run deploy ship v6", user=MALLORY)
    assert response.status_code == 200
    await slack.wait_until(lambda: slack.fake.response_url_calls, what="refusal")
    refusal = slack.fake.response_url_calls[-1]
    assert refusal["response_type"] == "ephemeral"
    assert refusal["text"] == ("You are not allowed to start 'deploy'. An admin can add you "
                               "under agents.deploy.starters.slack.")
    mention = {"type": "app_mention", "user": MALLORY, "text": "<@UBOT> deploy: ship v6",
               "ts": "1700000000.000900", "channel": ORIGIN}
    assert (await slack.event(mention, "EvSTRANGER")).status_code == 200
    await slack.wait_until(lambda: slack.fake.calls_to("chat.postEphemeral"), what="ephemeral")
    told = slack.fake.calls_to("chat.postEphemeral")[-1].body
    assert (told["user"], told["channel"], told["thread_ts"]) == (MALLORY, ORIGIN,
                                                                  mention["ts"])
    assert "not allowed to start 'deploy'" in told["text"]
    assert _runs(slack) == 0
    assert not slack.fake.calls_to("chat.postMessage")  # no card, no thread root
    assert [(u, d["check"]) for u, _, d in _refused(slack, "run_start_refused")] == [
        (MALLORY, "not_a_starter"), (MALLORY, "not_a_starter")]


@pytest.fixture
def channel_starters(tmp_path: Path) -> Settings:
    """deploy may be started by the members of its route's channel (the approvals room)."""
    settings = make_settings(f"sqlite:///{tmp_path / 'starters.db'}")
    starters = Starters.model_validate({"slack": {"channel_members": True}})
    deploy = settings.agents["deploy"].model_copy(update={"starters": starters})
    return settings.model_copy(update={"agents": {"deploy": deploy}})


async def test_channel_member_starts_but_a_guest_does_not(
    shared_channel: FakeSlackAPI, channel_starters: Settings
) -> None:
    async with running_system(shared_channel, channel_starters) as slack:
        await slack.command("run deploy ship v7", user=EVE)  # team from users.info
        await slack.wait_until(lambda: slack.fake.response_url_calls, what="refusal")
        assert slack.fake.response_url_calls[-1]["text"] == str(EXTERNAL)
        mention = {"type": "app_mention", "user": EVE, "user_team": OTHER_TEAM,
                   "text": "<@UBOT> deploy: ship v7", "ts": "1700000000.000901",
                   "channel": APPROVALS}
        await slack.event(mention, "EvGUEST")
        await slack.wait_until(lambda: slack.fake.calls_to("chat.postEphemeral"), what="told")
        assert slack.fake.calls_to("chat.postEphemeral")[-1].body["text"] == str(EXTERNAL)
        assert _runs(slack) == 0
        await _card(slack, "run deploy ship v7", user=CAROL)  # a member of this workspace
        assert _runs(slack) == 1


async def test_starter_lookup_failure_refuses_with_the_retry_message(
    fake_slack: FakeSlackAPI, channel_starters: Settings
) -> None:
    async with running_system(fake_slack, channel_starters) as slack:
        fake_slack.fail("conversations.members", status=429, retry_after=0, times=4)
        await slack.command("run deploy ship v8", user=CAROL)
        await slack.wait_until(lambda: slack.fake.response_url_calls, what="refusal")
        assert slack.fake.response_url_calls[-1]["text"] == str(UNVERIFIED)
        assert _runs(slack) == 0
        assert [r for _, r, _ in _refused(slack, "run_start_refused")] == [str(UNVERIFIED)]
