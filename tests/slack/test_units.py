"""Unit tests: config errors, directory caching, Web API retries, dedupe, serve wiring."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError

from bot.commands.serve_cmd import start_platforms
from bot.engine.core import Engine
from bot.engine.ports import DeliveryError, DeliveryTarget, DirectoryUnavailable, Origin
from bot.platforms.slack.adapter import SlackAdapter
from bot.platforms.slack.client import SDK_LOGGER, make_client
from bot.platforms.slack.config import SlackConfig, SlackConfigError
from bot.platforms.slack.dedupe import RecentIds
from bot.platforms.slack.directory import SlackDirectory
from bot.platforms.slack.listeners.actions import AcksFirst
from bot.platforms.slack.listeners.commands import parse
from bot.platforms.slack.listeners.mentions import parse_mention
from renderers.slack import render_request
from storage import Database
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackAPI
from tests.slack.conftest import make_settings

# ------------------------------------------------------------------ config


def test_missing_bot_token_names_the_variable() -> None:
    with pytest.raises(SlackConfigError, match=r"SLACK_BOT_TOKEN is not set.*OAuth & Permissions"):
        SlackConfig.from_env({"SLACK_SIGNING_SECRET": "s"})


def test_http_mode_needs_signing_secret() -> None:
    with pytest.raises(
        SlackConfigError, match=r"SLACK_SIGNING_SECRET is not set.*Basic Information"
    ):
        SlackConfig.from_env({"SLACK_BOT_TOKEN": "xoxb-1"})


def test_required_slack_without_any_variable() -> None:
    assert SlackConfig.from_env({}) is None
    with pytest.raises(SlackConfigError, match="SLACK_BOT_TOKEN"):
        SlackConfig.from_env({}, required=True)


def test_wrong_token_kinds_are_explained_without_echoing_them() -> None:
    with pytest.raises(SlackConfigError) as err:
        SlackConfig.from_env(
            {"SLACK_BOT_TOKEN": "xoxp-secret-user-token", "SLACK_SIGNING_SECRET": "s"}
        )
    assert "xoxp-secret" not in str(err.value)
    with pytest.raises(SlackConfigError, match="SLACK_APP_TOKEN"):
        SlackConfig.from_env({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xoxb-2"})


def test_socket_mode_and_api_url() -> None:
    config = SlackConfig.from_env(
        {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1", "SLACK_API_URL": "http://x/api"}
    )
    assert config is not None and config.socket_mode and config.api_url == "http://x/api/"
    assert "xoxb" not in repr(config) and "xapp" not in repr(config)


# ------------------------------------------------------------------ parsing


def test_command_and_mention_parsing() -> None:
    assert parse("  RUN deploy ship it ") == ("run", "deploy ship it")
    assert parse("") == ("", "")
    assert parse_mention("<@UBOT> deploy: ship v1") == ("deploy", "ship v1")
    assert parse_mention("<@UBOT|askhuman> deploy ship\nv1") == ("deploy", "ship\nv1")
    assert parse_mention("<@UBOT>") is None


def test_recent_ids_expire() -> None:
    seen = RecentIds(ttl_seconds=0.05, max_size=2)
    assert seen.add("a") and not seen.add("a")
    assert seen.add("b") and seen.add("c") and "a" not in seen  # bounded
    import time

    time.sleep(0.06)
    assert seen.add("c")


# ------------------------------------------------------------------ directory + client


@pytest.fixture
def fake() -> FakeSlackAPI:
    with FakeSlackAPI() as server:
        server.add_users(["U1", "U2"])
        yield server


_OPEN: list[Any] = []
"""Clients ``_client`` made for the running test (``close_clients`` closes them)."""


def _client(fake: FakeSlackAPI):  # type: ignore[no-untyped-def]
    config = SlackConfig(bot_token=BOT_TOKEN, signing_secret="s", api_url=fake.base_url)
    client = make_client(config)
    _OPEN.append(client)
    return client


@pytest.fixture(autouse=True)
async def close_clients() -> AsyncIterator[None]:
    """Close each test's Web API clients (their pooled aiohttp sessions) in its loop."""
    yield
    while _OPEN:
        await _OPEN.pop().aclose()


async def test_directory_caches_and_single_flights(fake: FakeSlackAPI) -> None:
    fake.group_members["S1"] = ["U1"]
    fake.channel_members["C1"] = [f"U{i}" for i in range(450)]  # three pages of 200
    directory = SlackDirectory(_client(fake), ttl_seconds=60)
    results = await asyncio.gather(*(directory.group_members("S1") for _ in range(20)))
    assert all(r == {"U1"} for r in results)
    assert len(fake.calls_to("usergroups.users.list")) == 1
    members = await directory.chat_members("C1")
    assert len(members) == 450 and len(fake.calls_to("conversations.members")) == 3
    await directory.chat_members("C1")
    assert len(fake.calls_to("conversations.members")) == 3
    assert await directory.resolve_users(["U1", "<@W2>", "bob@example.com"]) == {"U1", "W2"}
    assert await directory.display_name("U1") == "user-u1"


async def test_directory_fails_closed_and_does_not_cache_errors(fake: FakeSlackAPI) -> None:
    directory = SlackDirectory(_client(fake), ttl_seconds=60)
    assert await directory.group_members("S404") == set()  # "no such group" is an answer
    fake.group_members["S1"] = ["U2"]
    fake.fail("usergroups.users.list", status=429, retry_after=0, times=4)
    with pytest.raises(DirectoryUnavailable):
        await directory.group_members("S1")  # a failure is not "nobody"...
    assert await directory.group_members("S1") == {"U2"}  # ...and is not cached


async def test_directory_never_reuses_an_expired_answer(fake: FakeSlackAPI) -> None:
    now = [0.0]
    directory = SlackDirectory(_client(fake), ttl_seconds=60, clock=lambda: now[0])
    fake.channel_members["C1"] = ["U1"]
    fake.emails["ann@example.com"] = "U9"
    assert await directory.chat_members("C1") == {"U1"}
    assert await directory.resolve_users(["ann@example.com"]) == {"U9"}
    fake.fail("conversations.members", status=429, retry_after=0, times=4)
    fake.fail("users.lookupByEmail", status=429, retry_after=0, times=4)
    now[0] = 59.0
    assert await directory.chat_members("C1") == {"U1"}  # fresh: no call
    now[0] = 61.0
    with pytest.raises(DirectoryUnavailable):
        await directory.chat_members("C1")
    now[0] = 601.0
    with pytest.raises(DirectoryUnavailable):
        await directory.resolve_users(["ann@example.com"])
    assert await directory.resolve_users(["nobody@example.com", "U1"]) == {"U1"}


async def test_rate_limit_and_server_errors_are_retried(fake: FakeSlackAPI) -> None:
    client = _client(fake)
    fake.fail("chat.postMessage", status=429, retry_after=0, times=2)
    fake.fail("chat.postMessage", status=502, times=1)
    response = await client.chat_postMessage(channel="C1", text="hi")
    assert response["ok"] and len(fake.calls_to("chat.postMessage")) == 4


async def test_adapter_delivers_to_dm_and_maps_permanent_errors(fake: FakeSlackAPI) -> None:
    from tests.slack.test_adapter_cards import sample_card

    adapter = SlackAdapter(_client(fake))
    ref = await adapter.deliver(sample_card(), DeliveryTarget("user", "U1"))
    assert ref.channel == "DU1" and fake.calls_to("conversations.open")
    fake.missing_channels.add("C404")
    with pytest.raises(DeliveryError, match="channel_not_found"):
        await adapter.deliver(sample_card(), DeliveryTarget("channel", "C404"))
    fake.fail("chat.update", status=200, error="message_not_found")
    await adapter.update(sample_card(), ref)  # logged, never raised


async def test_run_result_is_escaped(fake: FakeSlackAPI) -> None:
    adapter = SlackAdapter(_client(fake))
    await adapter.post_run_result(Origin("slack", "C1", "1.1"), "<!channel> done & <@U1>")
    body = fake.calls_to("chat.postMessage")[0].body
    assert body["thread_ts"] == "1.1"
    assert "<!" not in body["text"] and "<@" not in body["text"] and "&amp;" in body["text"]
    await adapter.post_run_result(Origin("slack", "C1", None), "")
    assert fake.calls_to("chat.postMessage")[1].body == {  # no null thread_ts
        "channel": "C1", "text": "(empty output)", "unfurl_links": False,
        "unfurl_media": False}


async def test_card_updates_send_what_chat_update_sends(fake: FakeSlackAPI) -> None:
    """The adapter's JSON body for ``chat.update`` is slack-sdk's ``chat_update`` body."""
    from tests.slack.test_adapter_cards import sample_card

    client = _client(fake)
    ref = await SlackAdapter(client).deliver(sample_card(), DeliveryTarget("channel", "C1"))
    await SlackAdapter(client).update(sample_card(), ref)
    message = render_request(sample_card())
    await client.chat_update(channel=ref.channel, ts=ref.message_id, text=message["text"],
                             blocks=message["blocks"])
    ours, sdk = fake.calls_to("chat.update")
    assert ours.body == sdk.body and ours.headers["content-type"] == sdk.headers["content-type"]


def test_tokens_never_logged(fake: FakeSlackAPI, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    async def go() -> None:
        client = _client(fake)
        with contextlib.suppress(SlackApiError):
            await client.chat_postMessage(channel="C404", text="x")
        await client.aclose()  # in this loop: the session belongs to it

    fake.missing_channels.add("C404")
    asyncio.run(go())
    assert BOT_TOKEN not in caplog.text


class _Spy(str):
    """A text that counts how often a log line formats it (``repr``)."""

    formatted = 0

    def __repr__(self) -> str:
        type(self).formatted += 1
        return str.__repr__(self)


async def test_sdk_dumps_requests_only_when_debug_is_on(
    fake: FakeSlackAPI, caplog: pytest.LogCaptureFixture
) -> None:
    """slack-sdk formats a dump of every request and response (a whole card) unless
    its logger's ``level`` says DEBUG is off; it must say so when only the root
    logger's level is set, as ``askhuman serve`` sets it."""
    client = _client(fake)
    caplog.set_level(logging.INFO)
    _Spy.formatted = 0
    await client.api_call("chat.postMessage", json={"channel": "C1", "text": _Spy("hi")})
    assert _Spy.formatted == 0
    caplog.set_level(logging.DEBUG, logger=SDK_LOGGER)
    await client.api_call("chat.postMessage", json={"channel": "C1", "text": _Spy("hi")})
    assert _Spy.formatted > 0 and "Sending a request" in caplog.text
    assert BOT_TOKEN not in caplog.text


async def test_the_pooled_session_sends_no_cookies_back(fake: FakeSlackAPI) -> None:
    """Slack's answers set cookies; the Web API needs none (slack-sdk's own sessions
    live for one call), and a jar kept for the process would be filtered on each call."""
    fake.set_cookie = "b=abc; Path=/"
    config = SlackConfig(bot_token=BOT_TOKEN, signing_secret="s",
                         api_url=fake.base_url.replace("127.0.0.1", "localhost"))
    client = make_client(config)  # by name: aiohttp keeps no cookies from an IP address
    _OPEN.append(client)
    await client.auth_test()
    await client.auth_test()
    assert [call.headers.get("cookie") for call in fake.calls_to("auth.test")] == [None, None]


# ------------------------------------------------------------------ serve wiring


def _engine(tmp_path: Path, **route: object) -> Engine:
    settings = make_settings(f"sqlite:///{tmp_path / 'u.db'}", **route)
    return Engine(Database(settings.database_url), settings)


def test_serve_picks_http_or_socket_mode(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    http = start_platforms(
        engine, engine.settings, {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"}
    )
    assert [p for p, _ in http[0].endpoints] == ["/slack/events"] and not http[0].tasks
    socket = start_platforms(
        engine, engine.settings, {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}
    )
    assert socket[0].endpoints == [] and len(socket[0].tasks) == 1
    assert engine.platforms.adapter("slack") is not None


def test_serve_requires_slack_secrets_when_routes_use_slack(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    with pytest.raises(SlackConfigError, match="SLACK_BOT_TOKEN"):
        start_platforms(engine, engine.settings, {})


async def test_web_api_calls_reuse_one_connection(fake: FakeSlackAPI) -> None:
    """One pooled aiohttp session: sequential calls ride one kept-alive connection."""
    client = _client(fake)
    for _ in range(5):
        await client.auth_test()
    peers = {call.peer for call in fake.calls_to("auth.test")}
    assert len(fake.calls_to("auth.test")) == 5 and len(peers) == 1 and None not in peers
    await client.aclose()
    assert client.session is None
    await client.auth_test()  # a closed client reopens a session when used again
    assert len(fake.calls_to("auth.test")) == 6
    await client.aclose()


async def test_decisions_wait_until_the_burst_is_answered_not_just_acked() -> None:
    """``AcksFirst``: a click's ``ack()`` only marks its response ready; decisions wait
    until the endpoint has handed back every response of the burst, then ``quiet``."""
    acks = AcksFirst(quiet=0.05, patience=5.0)
    acks.arrived()  # the endpoint took request A
    acks.arrived()  # A's listener stores the click ...
    acks.acked()  # ... and acks it; A's response is not sent yet
    waiting = asyncio.ensure_future(acks.wait())
    await asyncio.sleep(0.2)
    assert not waiting.done()  # A is still being answered
    acks.acked()  # the endpoint handed A's response back
    answered = time.monotonic()
    await asyncio.wait_for(waiting, 1.0)
    assert time.monotonic() - answered >= 0.04  # the quiet period runs from the answer
    await asyncio.wait_for(acks.wait(), 0.2)  # nothing in flight: no wait at all

    acks.arrived()  # a slow click (Socket Mode: no endpoint reports it) ...
    await asyncio.sleep(0.2)
    acks.acked()  # ... is acked long after it arrived: its decision still lets the
    started = time.monotonic()  # acks of the clicks behind it go first
    await asyncio.wait_for(acks.wait(), 1.0)
    assert time.monotonic() - started >= 0.04

    patient = AcksFirst(quiet=0.05, patience=0.3)
    patient.arrived()  # a request that never ends holds decisions for ``patience`` only
    started = time.monotonic()
    await asyncio.wait_for(asyncio.gather(patient.wait(), patient.wait()), 2.0)
    assert 0.25 <= time.monotonic() - started < 1.5


async def test_a_lone_click_is_decided_once_answered_without_the_quiet_period() -> None:
    """``AcksFirst.wait(alone_since=…)``: a click nothing arrived after goes as soon as
    every response is handed back; in a burst the others still wait for the quiet
    (an hour here, so only a release that skips it can happen)."""
    acks = AcksFirst(quiet=3600.0, patience=3600.0)
    acks.arrived()  # the endpoint took the click
    mark = acks.arrived()  # its listener stores it ...
    acks.acked()  # ... and acks it
    lone = asyncio.ensure_future(acks.wait(alone_since=mark))
    await asyncio.sleep(0)
    assert not lone.done()  # its response is not handed back yet
    acks.acked()  # now it is: nothing else came in, so no quiet period
    await asyncio.wait_for(lone, 1.0)
    await asyncio.wait_for(acks.wait(alone_since=mark), 1.0)  # still alone: at once

    first, last = acks.arrived(), acks.arrived()  # a burst of two (Socket Mode)
    acks.acked()
    acks.acked()
    early = asyncio.ensure_future(acks.wait(alone_since=first))
    late = asyncio.ensure_future(acks.wait(alone_since=last))
    await asyncio.wait_for(late, 1.0)  # nothing arrived after the last one
    await asyncio.sleep(0.05)
    assert not early.done()  # the first of a burst waits for the quiet
    acks.arrived()  # and a click arriving meanwhile does not release it either
    acks.acked()
    await asyncio.sleep(0.05)
    assert not early.done()
    early.cancel()
