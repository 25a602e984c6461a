"""Unit tests: configuration, replay guard, directory, message parsing."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from bot.engine.ports import DirectoryUnavailable, Identity
from bot.platforms.feishu.client import FeishuApi
from bot.platforms.feishu.config import (
    FEISHU_DOMAIN_URL,
    LARK_DOMAIN_URL,
    FeishuConfig,
    FeishuConfigError,
    resolve_domain,
)
from bot.platforms.feishu.directory import FeishuDirectory, entry_kind
from bot.platforms.feishu.handlers import Incoming, file_reference, message_text
from bot.platforms.feishu.replay import ReplayGuard, parse_epoch
from tests.feishu.conftest import ALICE, ALICE_EMAIL, APPROVALS, CAROL, STARTER, make_config

BASE_ENV = {"FEISHU_APP_ID": "cli_a", "FEISHU_APP_SECRET": "s3cret-value"}


# ---------------------------------------------------------------- config


@pytest.mark.parametrize("missing", ["FEISHU_APP_ID", "FEISHU_APP_SECRET"])
def test_missing_credentials_name_the_variable(missing: str) -> None:
    env = {k: v for k, v in BASE_ENV.items() if k != missing}
    with pytest.raises(FeishuConfigError, match=missing):
        FeishuConfig.from_env(env)


@pytest.mark.parametrize("missing", ["FEISHU_ENCRYPT_KEY", "FEISHU_VERIFICATION_TOKEN"])
def test_http_mode_needs_keys(missing: str) -> None:
    env = {**BASE_ENV, "FEISHU_MODE": "http", "FEISHU_ENCRYPT_KEY": "k",
           "FEISHU_VERIFICATION_TOKEN": "t"}
    del env[missing]
    with pytest.raises(FeishuConfigError, match=missing):
        FeishuConfig.from_env(env)


def test_defaults_and_secrets_not_in_repr() -> None:
    config = FeishuConfig.from_env({**BASE_ENV, "FEISHU_ENCRYPT_KEY": "enc-key-x"})
    assert config.mode == "ws"
    assert config.domain == FEISHU_DOMAIN_URL
    assert "s3cret-value" not in repr(config) and "enc-key-x" not in repr(config)
    with pytest.raises(FeishuConfigError, match="FEISHU_MODE"):
        FeishuConfig.from_env({**BASE_ENV, "FEISHU_MODE": "webhook"})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", FEISHU_DOMAIN_URL),
        ("feishu", FEISHU_DOMAIN_URL),
        ("Lark", LARK_DOMAIN_URL),
        ("https://open.larksuite.com/", LARK_DOMAIN_URL),
        ("http://127.0.0.1:8123", "http://127.0.0.1:8123"),
        ("http://localhost:9", "http://localhost:9"),
    ],
)
def test_domains(value: str, expected: str) -> None:
    assert resolve_domain(value) == expected


@pytest.mark.parametrize(
    "value", ["http://open.feishu.cn", "ftp://x", "https://open.feishu.cn/api", "nonsense"]
)
def test_bad_domains(value: str) -> None:
    with pytest.raises(FeishuConfigError, match="FEISHU_DOMAIN"):
        resolve_domain(value)


def test_secrets_never_logged(fake_api: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A failing call logs code/status, never the app secret or the token."""
    import asyncio

    from bot.platforms.feishu.client import FeishuApiError

    fake, url = fake_api
    api = FeishuApi(make_config(url, fake.app_id, max_attempts=2))
    fake.fail_next("message.create", 5, status=500)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(FeishuApiError):
        asyncio.run(api.send_message("chat_id", APPROVALS, "text", "{}", "u1"))
    text = caplog.text + " ".join(str(r.__dict__) for r in caplog.records)
    assert "test-app-secret" not in text
    assert "t-fake-tenant-token" not in text


# ---------------------------------------------------------------- replay guard


def test_replay_guard_window_and_memory() -> None:
    now = [1_000_000.0]
    guard = ReplayGuard(window_seconds=300, event_ttl_seconds=3600, clock=lambda: now[0])
    assert guard.fresh(now[0] - 299) and guard.fresh(now[0] + 299)
    assert not guard.fresh(now[0] - 301) and not guard.fresh(now[0] + 301)
    assert guard.first_nonce("n1") and not guard.first_nonce("n1")
    assert guard.first_event("e1") and not guard.first_event("e1")
    assert not guard.first_event("") and not guard.first_nonce("")
    now[0] += 3601
    assert guard.first_event("e1")  # forgotten after its ttl
    assert guard.first_nonce("n1")


def test_replay_guard_is_bounded() -> None:
    guard = ReplayGuard(max_items=3)
    for i in range(10):
        assert guard.first_event(f"e{i}")
    assert guard.first_event("e0")  # evicted (oldest first)
    assert not guard.first_event("e9")


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("1603977298", 1603977298.0), ("1603977298000", 1603977298.0),
     ("1603977298000000", 1603977298.0), (None, None), ("x", None)],
)
def test_parse_epoch(value: str | None, seconds: float | None) -> None:
    assert parse_epoch(value) == seconds


# ---------------------------------------------------------------- directory


def test_entry_kinds() -> None:
    assert entry_kind("a@b.c") == "email"
    assert entry_kind("+86 138-0000-0000") == "mobile"
    assert entry_kind("ou_123") == "id"


async def test_directory_resolves_and_caches(fake_api: Any) -> None:
    fake, url = fake_api
    fake.users["+8613800000000"] = "ou_mobile"
    directory = FeishuDirectory(FeishuApi(make_config(url, fake.app_id)))
    entries = [ALICE_EMAIL.upper(), "ghost@example.com", "+86 138 0000 0000", "ou_listed"]
    assert await directory.resolve_users(entries) == {ALICE, "ou_mobile", "ou_listed"}
    assert await directory.resolve_users(entries) == {ALICE, "ou_mobile", "ou_listed"}
    assert len(fake.calls_to("user.batch_get_id")) == 2  # one per kind, then cached


async def test_directory_chunks_50(fake_api: Any) -> None:
    fake, url = fake_api
    directory = FeishuDirectory(FeishuApi(make_config(url, fake.app_id)))
    emails = [f"user{i}@example.com" for i in range(120)]
    assert await directory.resolve_users(emails) == set()
    assert [len(c.body["emails"]) for c in fake.calls_to("user.batch_get_id")] == [50, 50, 20]


async def test_directory_lookup_failure_is_not_cached(fake_api: Any) -> None:
    fake, url = fake_api
    directory = FeishuDirectory(FeishuApi(make_config(url, fake.app_id, max_attempts=1)))
    fake.fail_next("user.batch_get_id", 1, status=500)
    with pytest.raises(DirectoryUnavailable):  # a failure is not "nobody"...
        await directory.resolve_users([ALICE_EMAIL])
    assert await directory.resolve_users([ALICE_EMAIL]) == {ALICE}  # ...nor cached


async def test_directory_never_reuses_an_expired_answer(fake_api: Any) -> None:
    fake, url = fake_api
    now = [0.0]
    directory = FeishuDirectory(FeishuApi(make_config(url, fake.app_id, max_attempts=1)),
                                chat_ttl_seconds=60, clock=lambda: now[0],
                                resolve_ttl_seconds=600)
    assert await directory.chat_members(APPROVALS) == {CAROL, STARTER}
    assert await directory.resolve_users([ALICE_EMAIL]) == {ALICE}
    fake.fail_next("chat_members.get", 5, status=429)
    fake.fail_next("user.batch_get_id", 5, status=429)
    now[0] = 59.0
    assert await directory.chat_members(APPROVALS) == {CAROL, STARTER}  # fresh
    now[0] = 61.0
    with pytest.raises(DirectoryUnavailable):
        await directory.chat_members(APPROVALS)
    assert await directory.resolve_users([ALICE_EMAIL]) == {ALICE}  # still fresh
    now[0] = 601.0
    with pytest.raises(DirectoryUnavailable):
        await directory.resolve_users([ALICE_EMAIL])


async def test_chat_members_paginate_and_cache(fake_api: Any) -> None:
    fake, url = fake_api
    fake.chats["oc_big"] = [f"ou_{i}" for i in range(250)]
    now = [0.0]
    directory = FeishuDirectory(FeishuApi(make_config(url, fake.app_id)), chat_ttl_seconds=60,
                                clock=lambda: now[0])
    members = await directory.chat_members("oc_big")
    assert len(members) == 250
    assert len(fake.calls_to("chat_members.get")) == 3
    await directory.chat_members("oc_big")
    assert len(fake.calls_to("chat_members.get")) == 3
    now[0] += 61
    assert await directory.chat_members(APPROVALS) == {CAROL, STARTER}
    assert await directory.group_members("anything") == set()


# ---------------------------------------------------------------- message parsing


def incoming(content: dict[str, Any], message_type: str = "text",
             mentions: list[tuple[str, str]] | None = None) -> Incoming:
    return Incoming(
        message_id="om_1", chat_id="oc_1", chat_type="group", message_type=message_type,
        content=json.dumps(content), parent_id=None, root_id=None,
        mentions=mentions or [], sender=Identity("feishu", "ou_x"),
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("@_user_1 deploy: ship v1", "deploy: ship v1"),
        ("@_user_1   @_user_2 deploy: ping @_user_2", "deploy: ping @Dana"),
        ("deploy：全角冒号", "deploy：全角冒号"),
    ],
)
def test_mentions_are_stripped(text: str, expected: str) -> None:
    msg = incoming({"text": text}, mentions=[("@_user_1", "bot"), ("@_user_2", "Dana")])
    assert message_text(msg) == expected


def testfile_reference_shapes() -> None:
    ref = file_reference(incoming({"image_key": "img_1"}, "image"))
    assert ref == {"platform": "feishu", "id": "img_1", "name": "img_1.png",
                   "mimetype": "image/png", "size": None, "url": None}
    assert file_reference(incoming({"text": "x"}, "file")) is None


# ---------------------------------------------------------------- serve wiring


class _Engine:
    def __init__(self) -> None:
        self.registered: list[Any] = []

    def register_adapter(self, adapter: Any, directory: Any = None) -> None:
        self.registered.append((adapter, directory))


def test_serve_wiring(tmp_path: Any) -> None:
    from bot.platforms.feishu import build_feishu_platform, feishu_configured
    from tests.feishu.conftest import make_settings

    settings = make_settings(f"sqlite:///{tmp_path / 'x.db'}")
    assert feishu_configured(settings, {})  # a route uses Feishu
    with pytest.raises(FeishuConfigError, match="FEISHU_APP_ID"):
        build_feishu_platform(settings, _Engine(), {})

    engine = _Engine()
    ws = build_feishu_platform(settings, engine, BASE_ENV)
    assert ws.endpoints() == [] and len(ws.background_tasks()) == 1
    assert engine.registered == [(ws.adapter, ws.directory)]
    assert ws.approver_entries == [ALICE_EMAIL, "ou_bob", STARTER]  # approvers, starters

    http_env = {**BASE_ENV, "FEISHU_MODE": "http", "FEISHU_ENCRYPT_KEY": "k",
                "FEISHU_VERIFICATION_TOKEN": "t"}
    http = build_feishu_platform(settings, _Engine(), http_env)
    assert [path for path, _ in http.endpoints()] == ["/feishu/events"]


def test_endpoint_reads_the_event_id_it_records_with_the_nonce() -> None:
    from bot.platforms.feishu.inbound import BadBody, event_id, open_body
    from tests.fakes.feishu_signing import encrypt

    event = json.dumps({"schema": "2.0", "header": {"event_id": "ev_1"}}).encode()
    body = json.dumps({"encrypt": encrypt(event, "k")}).encode()
    assert event_id(open_body(body, "k")) == "ev_1"
    assert event_id(open_body(event, "k")) == "ev_1"  # unencrypted (no encrypt key configured)
    for junk, key in ((body, ""), (body, "other-key"), (b"not json", "k"),
                      (b"[1]", "k"), (b'{"schema": "2.0"}', "k")):
        with pytest.raises(BadBody):
            open_body(junk, key)
    challenge = json.dumps({"challenge": "c", "type": "url_verification"}).encode()
    assert event_id(open_body(challenge, "k")) is None
