"""``/slack/events`` refuses hostile input cheaply: size cap, signature first, junk → 4xx.

Each test talks to the served app (uvicorn on loopback) and checks the log the
server wrote: a refusal is one short line, never a traceback.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from bot.platforms.slack.runtime import SlackPlatform
from tests.fakes.log_capture import LogRecords, captured_logs
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackAPI
from tests.slack.conftest import SIGNING_SECRET, Slack, sign

EVENTS = "/slack/events"
FORM = "application/x-www-form-urlencoded"
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture
def logs(slack: Slack) -> Iterator[LogRecords]:
    """Everything logged once the server runs (uvicorn set up its loggers at start)."""
    with captured_logs() as records:
        yield records


def sign_bytes(body: bytes, ts: str | None = None) -> dict[str, str]:
    """Slack's signature over raw bytes (for bodies that are not UTF-8)."""
    ts = ts or str(int(time.time()))
    digest = hmac.new(SIGNING_SECRET.encode(), b"v0:" + ts.encode() + b":" + body,
                      hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": "v0=" + digest}


async def post_raw(slack: Slack, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
    response = await slack.http.post(slack.url + EVENTS, content=body, headers=headers)
    return response.status_code, response.text


async def still_serves(slack: Slack) -> float:
    """A signed ``/askhuman run`` without a prompt still gets its usage text in the ack;
    returns how long it took."""
    started = time.monotonic()
    response = await slack.command("run")
    assert response.status_code == 200
    assert "/askhuman run <agent> <prompt>" in response.text
    return time.monotonic() - started


def assert_clean(logs: LogRecords, refusals: int) -> None:
    """No traceback anywhere; exactly one short line per refused request."""
    assert logs.tracebacks() == []
    refused = [r for r in logs.records if r.getMessage() == "slack request refused"]
    refused += [r for r in logs.records if r.getMessage() == "http request refused"]
    assert len(refused) == refusals, logs.lines()
    assert all(len(line) < 400 for line in logs.lines())


# ------------------------------------------------------------------------------ size


async def test_oversize_unsigned_post_gets_413_at_once(slack: Slack, logs: LogRecords) -> None:
    body = b"{" + b"a" * (11 * 1024 * 1024)
    started = time.monotonic()
    status, text = await post_raw(slack, body, {"Content-Type": "application/json"})
    assert status == 413
    assert "too large" in text
    assert time.monotonic() - started < 5  # the issue measured a 6-11 s stall
    assert await still_serves(slack) < 5
    assert_clean(logs, refusals=1)


async def test_declared_oversize_body_is_refused_without_reading_it(
    slack: Slack, logs: LogRecords
) -> None:
    """Only headers are sent: the 413 comes back although not one body byte arrived."""
    host, port = slack.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"POST {EVENTS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {2 * 1024 * 1024}\r\n\r\n".encode())
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), 5)
    writer.close()
    assert status_line.startswith(b"HTTP/1.1 413")
    assert await still_serves(slack) < 5
    assert_clean(logs, refusals=1)


async def test_chunked_body_stops_being_read_past_the_cap(
    slack: Slack, logs: LogRecords
) -> None:
    """A chunked body just over 1 MiB that never ends: answered 413 without waiting."""
    host, port = slack.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"POST {EVENTS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n".encode())
    chunk = b"x" * 65536
    for _ in range(17):  # 17 × 64 KiB > 1 MiB, and no terminating chunk
        writer.write(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), 5)
    writer.close()
    assert status_line.startswith(b"HTTP/1.1 413")
    assert await still_serves(slack) < 5
    assert_clean(logs, refusals=1)


# ------------------------------------------------------------------------- signature


async def test_unsigned_junk_is_refused_before_parsing(slack: Slack, logs: LogRecords) -> None:
    """Unparseable bodies without a valid signature get 401, not a parser's 400 or 500."""
    for body in (b'{"type": ', DEEP.encode(), b"payload=%7Bnot-json", b"\xff\xfe{}"):
        status, _ = await post_raw(slack, body, {"Content-Type": "application/json"})
        assert status == 401, body[:20]
        forged = {"X-Slack-Request-Timestamp": str(int(time.time())),
                  "X-Slack-Signature": "v0=" + "0" * 64}
        status, _ = await post_raw(slack, body, {"Content-Type": FORM, **forged})
        assert status in (400, 401), body[:20]  # 400 only for the non-UTF-8 body
    assert_clean(logs, refusals=8)


@pytest.mark.parametrize(("stamp", "status"), [
    # Validly signed, but stale / from the future: 10 s past the 300 s window, as the
    # stamp is whole seconds (up to 1 s lost) and the request takes a moment to arrive.
    ("-310", 401),
    ("+310", 401),
    ("yesterday", 400),
    ("9" * 5000, 400),  # too many digits for int()
    ("", 401),
])
async def test_timestamp_header_is_checked(
    slack: Slack, logs: LogRecords, stamp: str, status: int
) -> None:
    body = "command=%2Faskhuman&text=help"
    if stamp[:1] in "+-" and stamp:
        stamp = str(int(time.time()) + int(stamp))
        headers = {"Content-Type": FORM, **sign(body, ts=stamp)}
    else:
        headers = {"Content-Type": FORM, **sign(body), "X-Slack-Request-Timestamp": stamp}
    got, text = await post_raw(slack, body.encode(), headers)
    assert got == status
    assert len(text) < 100
    assert_clean(logs, refusals=1)


async def test_signature_over_other_body_is_refused(slack: Slack, logs: LogRecords) -> None:
    body = "command=%2Faskhuman&text=help"
    headers = {"Content-Type": FORM, **sign(body + "&x=1")}
    assert (await post_raw(slack, body.encode(), headers))[0] == 401
    assert_clean(logs, refusals=1)


# ----------------------------------------------------------------------- signed junk

SIGNED_JUNK: list[tuple[str, bytes, str]] = [
    ("invalid json", b'{"type": "event_callback", ', "application/json"),
    ("deeply nested json", DEEP.encode(), "application/json"),
    ("json array", b"[1, 2, 3]", "application/json"),
    ("json null", b"null", "application/json"),
    ("broken payload field", b"payload=%7B%22type%22%3A", FORM),
    ("payload is an array", b"payload=" + quote("[1]").encode(), FORM),
    ("deep payload field", b"payload=" + quote(DEEP).encode(), FORM),
    ("not utf-8", b'{"type": "\xff\xfe"}', "application/json"),
    ("team of the wrong type", json.dumps({"type": "event_callback", "team_id": 1,
                                           "team": "x", "event": []}).encode(),
     "application/json"),
    ("actions of the wrong type", b"payload=" + quote(json.dumps(
        {"type": "block_actions", "actions": 5, "user": "x"})).encode(), FORM),
    ("action id not a string", b"payload=" + quote(json.dumps(
        {"type": "block_actions", "actions": [{"action_id": 5}]})).encode(), FORM),
    ("view without callback id", b"payload=" + quote(json.dumps(
        {"type": "view_submission", "user": {"id": "U1"}, "view": {}})).encode(), FORM),
    ("command without user", b"command=%2Faskhuman&text=run+deploy+x", FORM),
    ("event id not a string", json.dumps({"type": "event_callback", "event_id": ["x"],
                                          "event": {"type": "app_mention"}}).encode(),
     "application/json"),
]


@pytest.mark.parametrize(("name", "body", "content_type"), SIGNED_JUNK,
                         ids=[case[0] for case in SIGNED_JUNK])
async def test_signed_junk_gets_400_and_one_log_line(
    slack: Slack, logs: LogRecords, name: str, body: bytes, content_type: str
) -> None:
    """Correctly signed, but no Slack payload: 400 with a reason, not Bolt's 500."""
    status, text = await post_raw(slack, body, {"Content-Type": content_type,
                                                 **sign_bytes(body)})
    assert status == 400, (name, status, text)
    assert text.startswith(("malformed Slack payload", "body is not UTF-8"))
    assert await still_serves(slack) < 5
    assert_clean(logs, refusals=1)


async def test_malformed_signed_bodies_are_named_in_the_reply(slack: Slack) -> None:
    status, text = await post_raw(slack, b"[1]", {"Content-Type": "application/json",
                                                   **sign_bytes(b"[1]")})
    assert (status, text) == (400, "malformed Slack payload (AttributeError)")
    body = b"\xff"
    status, text = await post_raw(slack, body, {"Content-Type": FORM, **sign_bytes(body)})
    assert (status, text) == (400, "body is not UTF-8")


# ------------------------------------------------------------------------ logs, Bolt


async def test_card_delivered_line_keeps_its_time(slack: Slack, logs: LogRecords) -> None:
    """The Slack message ts is ``message_ts``; the line's ``ts`` is still the log time."""
    response = await slack.command("run deploy ship v1")
    assert response.status_code == 200
    ts = await slack.wait_for_card()
    await slack.wait_until(lambda: "slack card delivered" in logs.messages())
    line = next(json.loads(text) for text in logs.lines() if "slack card delivered" in text)
    assert line["message_ts"] == ts
    assert line["ts"] != ts and line["ts"][:4].isdigit() and "T" in line["ts"]


def test_no_bolt_token_warning_at_build(
    monkeypatch: pytest.MonkeyPatch, fake_slack: FakeSlackAPI, caplog: pytest.LogCaptureFixture
) -> None:
    """Bolt reads SLACK_BOT_TOKEN itself and warned at every start; not any more."""
    from bot.platforms.slack.config import SlackConfig

    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    config = SlackConfig(bot_token=BOT_TOKEN, signing_secret=SIGNING_SECRET,
                         api_url=fake_slack.base_url)
    caplog.set_level(logging.DEBUG)
    platform = SlackPlatform(config, engine=object())  # type: ignore[arg-type]
    assert platform.app.client.token == BOT_TOKEN
    assert not [r for r in caplog.records if "will be unused" in r.getMessage()]
    bolt_log = logging.getLogger("bot.platforms.slack.bolt")
    assert bolt_log.filters == []  # other Bolt warnings still get through
    bolt_log.warning("As you gave `client` as well, `token` will be unused.")
    assert [r for r in caplog.records if "will be unused" in r.getMessage()]
