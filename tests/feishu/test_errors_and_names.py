"""Feishu/Slack API errors → words (no raw API text), and the open_id → name cache."""

from __future__ import annotations

import asyncio

import pytest

from bot.engine.ports import UNDELIVERABLE_REASON, DeliveryError, delivery_reason
from bot.platforms.feishu.client import FeishuApiError
from bot.platforms.feishu.errors import feishu_words
from bot.platforms.feishu.names import NEUTRAL, NameCache
from bot.platforms.slack.errors import slack_words

RAW = "Bot/User can NOT be out of the chat. xyzzy-detail"


@pytest.mark.parametrize(("code", "status", "words"), [
    (230002, 400, "askhuman isn't in that chat; an admin must add the bot to it."),
    (230013, 400, "outside the app's availability"),
    (99991663, 400, "credentials"),
    (99991661, 400, "credentials"),
    (230020, 400, "rate limiting"),
    (None, 429, "rate limiting"),
    (None, 503, "internal error"),
    (None, None, "could not be reached"),
    (123456, 400, "the bot's logs have the error code"),
])
def test_feishu_codes_become_words(code: int | None, status: int | None, words: str) -> None:
    exc = FeishuApiError("message.create", code, RAW, status=status, log_id="log123")
    said = feishu_words(exc)
    assert words in said
    for raw in ("NOT be out", "xyzzy", "log123", "code=", str(code)):
        assert raw not in said


@pytest.mark.parametrize(("code", "words"), [
    ("not_in_channel", "isn't in that channel"),
    ("channel_not_found", "doesn't exist"),
    ("is_archived", "archived"),
    ("invalid_auth", "SLACK_BOT_TOKEN"),
    ("ratelimited", "rate limiting askhuman; retrying"),
    ("msg_too_long", "too long"),
    ("http_502", "internal error"),
    ("ClientConnectorError", "could not be reached"),
    ("some_new_error", "the bot's logs have the error code"),
])
def test_slack_codes_become_words(code: str, words: str) -> None:
    said = slack_words(code)
    assert words in said and code not in said


def test_delivery_error_keeps_detail_apart_from_words() -> None:
    exc = DeliveryError("feishu message.create failed: code=230002", reason="In words.",
                        code=230002)
    assert str(exc) == "feishu message.create failed: code=230002"
    assert delivery_reason(exc) == "In words." and exc.code == 230002
    assert delivery_reason(DeliveryError("raw text")) == UNDELIVERABLE_REASON
    assert delivery_reason(ConnectionResetError("peer reset")) == UNDELIVERABLE_REASON


async def test_name_cache_hits_misses_and_timeouts() -> None:
    calls: list[str] = []
    now = [0.0]

    async def lookup(open_id: str) -> str | None:
        calls.append(open_id)
        if open_id == "ou_slow":
            await asyncio.sleep(0.2)
        if open_id == "ou_broken":
            raise FeishuApiError("user.get", 41050, "no user authority", status=400)
        return {"ou_alice": "  Alice \n Chen ", "ou_slow": "Slow"}.get(open_id)

    names = NameCache(lookup, ttl=10, miss_ttl=5, clock=lambda: now[0])
    assert await names.name("ou_alice") == "Alice Chen"
    assert await names.name("ou_alice") == "Alice Chen" and calls == ["ou_alice"]
    assert await names.name("ou_broken") is None
    assert await names.name("ou_broken") is None and calls.count("ou_broken") == 1
    now[0] = 6  # the miss expired, the hit did not
    assert await names.name("ou_broken") is None and calls.count("ou_broken") == 2
    assert await names.name("ou_alice") == "Alice Chen" and calls.count("ou_alice") == 1
    assert await names.name("ou_slow", timeout=0.01) is None  # too slow for this reply...
    await asyncio.sleep(0.3)
    assert await names.name("ou_slow", timeout=0.01) == "Slow"  # ...but cached for the next


async def test_humanize_replaces_every_open_id() -> None:
    async def lookup(open_id: str) -> str | None:
        return "Alice" if open_id == "ou_alice" else None

    names = NameCache(lookup)
    text = "Already decided by ou_alice (Approve); cancelled by ou_nobody. (xou_alice stays)"
    out = await names.humanize(text)
    assert out == (f"Already decided by Alice (Approve); cancelled by {NEUTRAL}. "
                   "(xou_alice stays)")
    assert await names.humanize("no ids here") == "no ids here"
