"""``/feishu/events`` refuses hostile input before lark-oapi sees it.

lark-oapi logs an error with a traceback for every request it refuses, so anything
unsigned, forged or malformed must stop in our endpoint: 401 (not from Feishu) or
400 (from Feishu but junk), and one short log line. Each test talks to the served
app on loopback and reads everything the server logged.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fakes.feishu_api import Message
from tests.fakes.feishu_signing import encrypt, signature
from tests.fakes.log_capture import LogRecords, captured_logs
from tests.feishu.conftest import ENCRYPT_KEY, VERIFICATION_TOKEN, Feishu

EVENTS = "/feishu/events"
DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.fixture
def logs(feishu_http: Feishu) -> Iterator[LogRecords]:
    """Everything logged once the server runs (uvicorn set up its loggers at start)."""
    with captured_logs() as records:
        yield records


def signed_headers(body: bytes, timestamp: str | None = None) -> dict[str, str]:
    ts = str(int(time.time())) if timestamp is None else timestamp
    nonce = uuid.uuid4().hex
    return {"X-Lark-Request-Timestamp": ts, "X-Lark-Request-Nonce": nonce,
            "X-Lark-Signature": signature(ts, nonce, ENCRYPT_KEY, body),
            "Content-Type": "application/json"}


def encrypted(payload: dict[str, Any] | bytes) -> bytes:
    plain = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return json.dumps({"encrypt": encrypt(plain, ENCRYPT_KEY)}).encode()


async def post(f: Feishu, body: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    assert f.http is not None
    return await f.http.post(f.url + EVENTS, content=body, headers=headers or {})


async def pending_card(f: Feishu) -> Message:
    await f.send_text("@_user_1 deploy: ship v9.9.9")
    card = await f.wait_card()
    assert await f.status(card) == "pending"
    return card


def assert_clean(logs: LogRecords, refusals: int) -> None:
    """No traceback, nothing from lark-oapi, one short line per refused request."""
    assert logs.tracebacks() == []
    assert logs.messages("Lark") == []
    refused = [m for m in logs.messages() if m in ("feishu callback refused",
                                                   "http request refused")]
    assert len(refused) == refusals, logs.lines()
    assert all(len(line) < 400 for line in logs.lines())


async def click_still_decides(f: Feishu, card: Message) -> None:
    await f.click(card)
    assert await f.status(card) == "submitted"


# ----------------------------------------------------------------------- unsigned


async def test_unsigned_click_is_refused_before_the_sdk(
    feishu_http: Feishu, logs: LogRecords
) -> None:
    f = feishu_http
    card = await pending_card(f)
    logs.clear()
    event = f.click_event(card)
    for body in (json.dumps(event).encode(), encrypted(event)):
        response = await post(f, body, {"Content-Type": "application/json"})
        assert response.status_code == 401
        assert response.json() == {"msg": "rejected"}
    assert await f.status(card) == "pending"
    assert_clean(logs, refusals=2)
    await click_still_decides(f, card)


@pytest.mark.parametrize("body", [
    b"", b"{", b"\xff\xfe\x00", DEEP, b"[1]", b'{"encrypt": "bm90IGEgY2lwaGVy"}',
    b'{"schema": "2.0"}', json.dumps({"type": "url_verification", "challenge": "c",
                                      "pad": "x" * 5000, "token": VERIFICATION_TOKEN}).encode(),
], ids=["empty", "invalid", "not-utf8", "deep", "array", "bad-cipher", "no-header", "large"])
async def test_unsigned_junk_gets_401_and_one_line(
    feishu_http: Feishu, logs: LogRecords, body: bytes
) -> None:
    response = await post(feishu_http, body)
    assert response.status_code == 401
    assert_clean(logs, refusals=1)


async def test_url_verification_works_unsigned_with_our_token(
    feishu_http: Feishu, logs: LogRecords
) -> None:
    """The console's challenge: plain or encrypted, signed or not, but with our token."""
    challenge = {"type": "url_verification", "challenge": "c-42", "token": VERIFICATION_TOKEN}
    for body in (json.dumps(challenge).encode(), encrypted(challenge)):
        response = await post(feishu_http, body, {"Content-Type": "application/json"})
        assert (response.status_code, response.json()) == (200, {"challenge": "c-42"})
    for token in ("forged", None, 42):
        forged = {**challenge, "token": token}
        for body in (json.dumps(forged).encode(), encrypted(forged)):
            assert (await post(feishu_http, body)).status_code == 401
    assert_clean(logs, refusals=6)


# ------------------------------------------------------------------------- signed


@pytest.mark.parametrize("where", ["header", "missing-header-token"])
async def test_wrong_verification_token_never_reaches_the_sdk(
    feishu_http: Feishu, logs: LogRecords, where: str
) -> None:
    f = feishu_http
    card = await pending_card(f)
    logs.clear()
    event = f.click_event(card)
    event["header"]["token"] = "forged-token" if where == "header" else 7
    body = encrypted(event)
    response = await post(f, body, signed_headers(body))
    assert response.status_code == 401
    assert await f.status(card) == "pending"
    assert_clean(logs, refusals=1)
    await click_still_decides(f, card)


SIGNED_JUNK = [
    ("invalid json", b'{"schema": "2.0", '),
    ("not utf-8", b'{"schema": "\xff\xfe"}'),
    ("deeply nested json", DEEP),
    ("json array", b"[1, 2]"),
    ("undecryptable", b'{"encrypt": "bm90IGEgcmVhbCBjaXBoZXJ0ZXh0IGF0IGFsbCEh"}'),
    ("encrypt not a string", b'{"encrypt": 5}'),
    ("encrypted invalid json", encrypted(b"{not json")),
    ("encrypted deep json", encrypted(DEEP)),
    ("2.0 event without header", encrypted({"schema": "2.0", "event": {}})),
    ("2.0 event with a string header", encrypted({"schema": "2.0", "header": "x"})),
]


@pytest.mark.parametrize(("name", "body"), SIGNED_JUNK, ids=[c[0] for c in SIGNED_JUNK])
async def test_signed_junk_gets_400_and_one_line(
    feishu_http: Feishu, logs: LogRecords, name: str, body: bytes
) -> None:
    """Correctly signed but no Feishu callback: 400, not the SDK's 500 and traceback."""
    response = await post(feishu_http, body, signed_headers(body))
    assert response.status_code == 400, name
    assert_clean(logs, refusals=1)


@pytest.mark.parametrize(("stamp", "status"), [
    ("yesterday", 400), ("", 400), ("1e400", 400), ("-600", 401), ("+600", 401),
])
async def test_timestamp_header_is_checked(
    feishu_http: Feishu, logs: LogRecords, stamp: str, status: int
) -> None:
    f = feishu_http
    card = await pending_card(f)
    logs.clear()
    if stamp[:1] in "+-" and stamp:
        stamp = str(int(time.time()) + int(stamp))
    body = encrypted(f.click_event(card))
    response = await post(f, body, signed_headers(body, timestamp=stamp))
    assert response.status_code == status
    assert await f.status(card) == "pending"
    assert_clean(logs, refusals=1)


# --------------------------------------------------------------------------- size


async def test_oversize_post_gets_413_and_clicks_keep_working(
    feishu_http: Feishu, logs: LogRecords
) -> None:
    f = feishu_http
    card = await pending_card(f)
    logs.clear()
    body = b'{"encrypt": "' + b"A" * (2 * 1024 * 1024) + b'"}'
    started = time.monotonic()
    for headers in ({}, signed_headers(body)):
        response = await post(f, body, headers)
        assert response.status_code == 413
        assert "too large" in response.text
    assert time.monotonic() - started < 5
    assert_clean(logs, refusals=2)
    await click_still_decides(f, card)
