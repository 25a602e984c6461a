"""Plain card clicks take askhuman's fast path past Bolt, with the same outcome.

Served app over loopback HTTP, signed like Slack signs. Which way a click came in is
observable in the ``askhuman_slack_clicks`` counter (label ``path``) and in the
"slack click answered" log line's ``path`` field. The first request of each test is
a slash command: Bolt authorizes the app with it (``auth.test``), which opens the
fast path.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, unquote_plus

import pytest
from prometheus_client import CollectorRegistry

from bot import metrics
from bot.platforms.slack.fast_clicks import form_value, read_click
from bot.settings import Settings
from tests.fakes.log_capture import LogRecords, captured_logs
from tests.fakes.slack_api import FakeSlackAPI
from tests.slack.conftest import (
    ALICE,
    BOB,
    CAROL,
    MALLORY,
    Slack,
    running_system,
    sign,
)

FORM = "application/x-www-form-urlencoded"


class Clicks:
    """``askhuman_slack_clicks`` by path, read through a registry of its own."""

    def __init__(self) -> None:
        self._registry = CollectorRegistry()
        self._registry.register(metrics.SLACK_CLICKS)
        self._start = self._now()

    def _now(self) -> dict[str, float]:
        return {path: self._registry.get_sample_value(
            "askhuman_slack_clicks_total", {"path": path}) or 0.0 for path in ("fast", "bolt")}

    def since(self) -> dict[str, float]:
        now = self._now()
        return {path: now[path] - self._start[path] for path in now}


@pytest.fixture
def logs(slack: Slack) -> Iterator[LogRecords]:
    with captured_logs() as records:
        yield records


async def _card(slack: Slack) -> str:
    assert (await slack.command("run deploy ship v2.0.0")).status_code == 200
    return await slack.wait_for_card()


def _body(payload: dict[str, Any]) -> str:
    return "payload=" + quote(json.dumps(payload), safe="")


def _answered(logs: LogRecords) -> list[dict[str, Any]]:
    return [vars(r) for r in logs.records if r.getMessage() == "slack click answered"]


async def test_a_plain_approve_takes_the_fast_path(slack: Slack, logs: LogRecords) -> None:
    ts = await _card(slack)
    clicks = Clicks()
    bolt_ack = await slack.interact(slack.click_payload(ts, "Approve", MALLORY),
                                    **{"X-Slack-Retry-Num": "1"})  # → Bolt, refused
    response = await slack.interact(slack.click_payload(ts, "Approve", ALICE))
    assert response.status_code == 200
    # the same ack as Bolt's: 200, empty body, Bolt's content type
    assert (response.status_code, response.content) == (bolt_ack.status_code, bolt_ack.content)
    assert response.headers["content-type"] == bolt_ack.headers["content-type"]
    await slack.wait_until(lambda: slack.fake.calls_to("chat.update"), what="chat.update")
    row = slack.request_row()
    assert row.status == "submitted" and row.decided_by_user == ALICE
    assert ("decided", "ok", ALICE) in slack.audit()
    assert clicks.since() == {"fast": 1, "bolt": 1}
    await slack.wait_until(lambda: len(_answered(logs)) == 2, what="two answered lines")
    paths = {line["user"]: line["path"] for line in _answered(logs)}
    assert paths == {ALICE: "fast", MALLORY: "bolt"}


@pytest.mark.parametrize("forgery", ["bad signature", "stale", "signed for another body"])
async def test_forged_and_stale_clicks_are_401_on_the_fast_path(
    slack: Slack, forgery: str
) -> None:
    ts = await _card(slack)
    before = slack.card_message(ts).blocks
    clicks = Clicks()
    body = _body(slack.click_payload(ts, "Approve", ALICE))
    headers = sign(body)
    if forgery == "bad signature":
        headers["X-Slack-Signature"] = "v0=" + "1" * 64
    elif forgery == "stale":
        headers = sign(body, ts=str(int(time.time()) - 301))  # correctly signed, too old
    else:
        headers = sign(body.replace("U0ALICE", "U0BOB"))
    response = await slack.http.post(slack.url + "/slack/events", content=body.encode(),
                                     headers={"Content-Type": FORM, **headers})
    assert response.status_code == 401
    await asyncio.sleep(0.2)
    assert slack.request_row().status == "pending"
    assert slack.card_message(ts).blocks == before
    assert clicks.since() == {"fast": 0, "bolt": 0}
    assert ("decided", "ok", ALICE) not in slack.audit()


async def test_an_unauthorized_clicker_is_refused_in_their_language(slack: Slack) -> None:
    ts = await _card(slack)
    slack.fake.users[MALLORY]["locale"] = "zh-CN"
    clicks = Clicks()
    assert (await slack.interact(slack.click_payload(ts, "Approve", MALLORY))).status_code == 200
    await slack.wait_until(lambda: slack.ephemerals_to(MALLORY), what="ephemeral")
    assert slack.ephemerals_to(MALLORY) == ["你无权回复此请求。"]
    assert ("respond_unauthorized", "refused", MALLORY) in slack.audit()
    assert slack.request_row().status == "pending"
    assert clicks.since() == {"fast": 1, "bolt": 0}


async def test_a_click_on_an_answered_card_is_told_who_answered(slack: Slack) -> None:
    ts = await _card(slack)
    clicks = Clicks()
    late = slack.click_payload(ts, "Reject", BOB, environment="o0")  # Bob's card is older
    await slack.interact(slack.click_payload(ts, "Approve", ALICE))
    await slack.wait_until(lambda: slack.fake.calls_to("chat.update"), what="chat.update")
    await slack.interact(late)
    await slack.wait_until(lambda: slack.ephemerals_to(BOB), what="ephemeral")
    (told,) = slack.ephemerals_to(BOB)
    assert told.startswith("Already decided by u0alice (Approve)")  # the truth, named
    assert slack.request_row().decided_by_user == ALICE
    assert len([e for e in slack.audit() if e[0] == "decided"]) == 1
    assert clicks.since() == {"fast": 2, "bolt": 0}


async def test_an_unknown_action_falls_back_to_bolt(slack: Slack) -> None:
    ts = await _card(slack)
    before = slack.card_message(ts).blocks
    clicks = Clicks()
    payload = slack.click_payload(ts, "Approve", ALICE, action_id="ah:no-token-here")
    payload["actions"][0]["value"] = "ah:no-token-here"
    assert (await slack.interact(payload)).status_code == 200
    await slack.wait_until(lambda: slack.ephemerals_to(ALICE), what="ephemeral")
    assert "don't recognise this button" in slack.ephemerals_to(ALICE)[0]
    assert ("adapter_refused", "refused", ALICE) in slack.audit()  # Bolt's listener's audit
    assert slack.request_row().status == "pending"
    assert slack.card_message(ts).blocks == before
    assert clicks.since() == {"fast": 0, "bolt": 0}  # never stored: not a click of ours


async def test_racing_clicks_on_the_fast_path_give_one_decision(slack: Slack) -> None:
    ts = await _card(slack)
    clicks = Clicks()
    users = [ALICE, BOB, CAROL] * 7
    responses = await asyncio.gather(
        *(slack.interact(slack.click_payload(ts, "Approve", u)) for u in users[:20]))
    assert [r.status_code for r in responses] == [200] * 20
    await slack.wait_until(lambda: len(slack.fake.calls_to("chat.postEphemeral")) >= 19,
                           what="19 replies")
    assert len([e for e in slack.audit() if e[0] == "decided"]) == 1
    assert len(slack.fake.calls_to("chat.update")) == 1
    assert slack.request_row().status == "submitted"
    assert clicks.since() == {"fast": 20, "bolt": 0}


async def test_the_fast_path_opens_once_bolt_has_authorized_the_app(
    fake_slack: FakeSlackAPI, settings: Settings
) -> None:
    async with running_system(fake_slack, settings) as first:
        ts = await _card(first)
        mallory, alice = (first.click_payload(ts, "Approve", u) for u in (MALLORY, ALICE))
    async with running_system(fake_slack, settings) as slack:  # a new process's first clicks
        clicks = Clicks()
        fake_slack.fail("auth.test", error="invalid_auth")
        refused = await slack.interact(mallory)
        assert refused.status_code == 200 and "reinstall this app" in refused.text  # Bolt's
        assert clicks.since() == {"fast": 0, "bolt": 0}
        await slack.interact(mallory)  # auth.test passes now: Bolt takes it, refuses Mallory
        await slack.wait_until(lambda: slack.ephemerals_to(MALLORY), what="ephemeral")
        await slack.interact(alice)
        await slack.wait_until(lambda: slack.request_row().status == "submitted",
                               what="decision")
        assert clicks.since() == {"fast": 1, "bolt": 1}


# ------------------------------------------------------- what the fast path takes


def _plain(**changes: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "type": "block_actions", "user": {"id": ALICE, "team_id": "T0TEST"},
        "team": {"id": "T0TEST"}, "container": {"type": "message", "message_ts": "1.2",
                                                "channel_id": "C1"},
        "state": {"values": {"v1:env": {"in": {"type": "static_select"}}}},
        "response_url": "http://127.0.0.1:9/r",
        "actions": [{"type": "button", "action_id": "ah:ref1:approve", "value": "x"}],
    }
    payload.update(changes)
    return payload


def test_read_click_takes_only_plain_clicks_on_our_action_buttons() -> None:
    form = {"content-type": FORM}
    click = read_click(_body(_plain()).encode(), form)
    assert click is not None
    assert click.parsed == ("ref1", "approve")
    assert (click.where.who.user_id, click.where.who.team) == (ALICE, "T0TEST")
    assert (click.where.channel, click.where.ts) == ("C1", "1.2")
    assert click.where.values == {"v1:env": {"in": {"type": "static_select"}}}
    assert click.response_url == "http://127.0.0.1:9/r"
    to_bolt = {
        "a retried delivery": (_body(_plain()), {**form, "x-slack-retry-num": "1"}),
        "JSON content type": (_body(_plain()), {"content-type": "application/json"}),
        "another form field": (_body(_plain()) + "&x=1", form),
        "a JSON body": (json.dumps(_plain()), form),
        "a view submission": (_body(_plain(type="view_submission")), form),
        "two actions": (_body(_plain(actions=[_plain()["actions"][0]] * 2)), form),
        "a file button": (_body(_plain(actions=[{"action_id": "ahf:ref1:doc"}])), form),
        "a withdraw": (_body(_plain(actions=[{"action_id": "ahw:ref1"}])), form),
        "an edit button": (_body(_plain(actions=[{"action_id": "ahe:ref1"}])), form),
        "a batch button": (_body(_plain(actions=[{"action_id": "ahb:approve"}])), form),
        "a foreign button": (_body(_plain(actions=[{"action_id": "other",
                                                    "value": "ah:ref1:approve"}])), form),
        "an id that does not parse": (_body(_plain(actions=[{"action_id": "ah:x"}])), form),
        "an org-wide install": (_body(_plain(is_enterprise_install=True)), form),
        "a workflow function": (_body(_plain(function_data={"execution_id": "F"})), form),
        "a malformed user": (_body(_plain(user="U0ALICE")), form),
        "malformed JSON": ("payload=%7Bnope", form),
        "deep JSON": ("payload=" + "%5B" * 100_000 + "%5D" * 100_000, form),
    }
    taken = [why for why, (body, headers) in to_bolt.items()
             if read_click(body.encode(), headers) is not None]
    assert taken == []
    assert read_click(b"payload=%7B%7D\xff", form) is None  # not UTF-8: Bolt's, as before


def _unquoted(raw: bytes) -> str:
    try:
        return form_value(raw)
    except UnicodeDecodeError:
        return "not UTF-8"


def _reference(raw: bytes) -> str:
    try:
        return unquote_plus(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return "not UTF-8"


def test_the_payload_is_decoded_exactly_like_unquote_plus() -> None:
    """``form_value`` (C, through quoted-printable) against ``unquote_plus``: random
    strings of the pieces that could tell them apart (bad escapes, ``%%``, a trailing
    ``%``, ``=``, CR/LF, ``+``, raw and escaped non-ASCII, bad UTF-8) and quoted text."""
    rng = random.Random(22)
    pieces = [b"%", b"%", b"+", b"=", b"\n", b"\r", b"a", b"F", b"0", b"g", b"_", b" ",
              b"%C3%A9", b"%e2%82", b"%FF", b"\xc3\xa9", b"\xff", b"%%", b"%2B", b"%3d",
              b"%0A", b"%0D", b"%25"]
    for _ in range(30_000):
        raw = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 10)))
        assert _unquoted(raw) == _reference(raw), raw
    for _ in range(3_000):
        text = "".join(chr(rng.choice((rng.randint(0, 127), rng.randint(128, 0x10FFFF))))
                       for _ in range(rng.randint(0, 16)))
        raw = quote(text.encode("utf-8", "replace"), safe=rng.choice(("", "/", "=+%"))).encode()
        assert _unquoted(raw) == _reference(raw), raw
    body = _body(_plain(state={"values": {"v": {"in": {"value": "é 100% = +1 € 😀"}}}}))
    assert form_value(body.encode()[len("payload="):]) == json.dumps(_plain(
        state={"values": {"v": {"in": {"value": "é 100% = +1 € 😀"}}}}))
