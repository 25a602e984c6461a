"""App Home across replicas on PostgreSQL: a change made by replica A refreshes the
Home that replica B watches (``HomeSignals`` over ``LISTEN/NOTIFY``), and a person's
Home is published once per change however many replicas saw them open it."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.fakes.slack_api import FakeSlackAPI
from tests.slack.conftest import ALICE, Slack, make_settings, running_system
from tests.slack.test_app_home import open_home

pytestmark = pytest.mark.postgres

QUIET = 3.0
"""Longer than Home's refresh debounce (2 s): every refresh a change causes is done."""


def publishes(slack: Slack, user: str) -> int:
    return len([c for c in slack.fake.calls_to("views.publish") if c.body.get("user_id") == user])


async def test_a_request_made_on_a_appears_on_the_home_b_watches(
    fake_slack: FakeSlackAPI, postgres_url: str
) -> None:
    settings = make_settings(postgres_url)
    async with running_system(fake_slack, settings) as a, \
            running_system(fake_slack, settings) as b:
        home = await open_home(b, ALICE, "EvHomeR1")  # only B has seen Alice open Home
        assert "Nothing is waiting for you" in json.dumps(home)
        before = publishes(b, ALICE)
        await a.command("run deploy ship v7.0.0")  # started, stored and delivered by A
        await a.wait_for_card()
        await b.wait_until(lambda: "Deploy v7.0.0?" in json.dumps(fake_slack.homes[ALICE]),
                           what="Alice's Home (watched by B) shows A's new request")
        await asyncio.sleep(QUIET)
        assert publishes(b, ALICE) == before + 1
        assert a.engine.home_signals.sent >= 1


async def test_a_decision_on_a_refreshes_the_home_b_watches_once(
    fake_slack: FakeSlackAPI, postgres_url: str
) -> None:
    settings = make_settings(postgres_url)
    async with running_system(fake_slack, settings) as a, \
            running_system(fake_slack, settings) as b:
        await a.command("run deploy ship v7.1.0")
        ts = await a.wait_for_card()
        home = await open_home(b, ALICE, "EvHomeR2")
        assert "Deploy v7.1.0?" in json.dumps(home)
        await asyncio.sleep(QUIET)
        before = publishes(b, ALICE)
        click = await a.interact(a.click_payload(ts, "Approve", ALICE, environment="o1"))
        assert click.status_code == 200
        await b.wait_until(lambda: "Nothing is waiting for you" in json.dumps(
            fake_slack.homes[ALICE]), what="Alice's Home refreshed after A's decision")
        await a.wait_until(lambda: a.request_row().status == "submitted", what="decision")
        await asyncio.sleep(QUIET)  # the card update, the run's result: one new view
        assert publishes(b, ALICE) == before + 1


async def test_the_latest_open_wins_so_one_change_publishes_once(
    fake_slack: FakeSlackAPI, postgres_url: str
) -> None:
    settings = make_settings(postgres_url)
    async with running_system(fake_slack, settings) as a, \
            running_system(fake_slack, settings) as b:
        await open_home(a, ALICE, "EvHomeR3")
        await open_home(b, ALICE, "EvHomeR4")  # B now watches Alice; A stops
        await asyncio.sleep(0.5)  # A hears B's open
        before = publishes(a, ALICE)
        await a.command("run deploy ship v7.2.0")
        await a.wait_for_card()
        await b.wait_until(lambda: "Deploy v7.2.0?" in json.dumps(fake_slack.homes[ALICE]),
                           what="Alice's Home shows the new request")
        await asyncio.sleep(QUIET)
        assert publishes(a, ALICE) == before + 1  # not once per replica


async def test_a_grant_revoked_on_a_leaves_the_home_b_watches(
    fake_slack: FakeSlackAPI, postgres_url: str
) -> None:
    from tests.slack.test_grants_chat import click_revoke, make_grant

    settings = make_settings(postgres_url)
    async with running_system(fake_slack, settings) as a, \
            running_system(fake_slack, settings) as b:
        grant_id = make_grant(a)
        home = await open_home(b, ALICE, "EvHomeR5")  # only B watches Alice
        assert f"ahg:{grant_id}" in json.dumps(home)
        told = await click_revoke(a, ALICE, grant_id)  # revoked from the list, on A
        assert told["text"].startswith(f"Revoked standing grant G-{grant_id}")
        await b.wait_until(lambda: f"ahg:{grant_id}" not in json.dumps(
            fake_slack.homes[ALICE]), what="Alice's Home (watched by B) drops the grant")
