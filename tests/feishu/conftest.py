"""Feishu end-to-end harness: fake Open API + engine + the Feishu platform on loopback.

``feishu_http`` runs the real ASGI app (``serve_cmd.build_app``) under uvicorn in the
test's loop with HTTP callbacks; ``feishu_ws`` runs the same handlers the long
connection uses, fed with raw event bytes. The fake Open API always runs in its own
thread (``AsgiServer``), like the real service would be "somewhere else".
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import JsonValue
from sqlalchemy import select

from bot.agents.base import Outcome
from bot.askhuman.schema import AskHumanToolResult, DeferredToolCallPayload
from bot.commands.serve_cmd import PlatformRuntime, build_app
from bot.engine import Engine, registry_runtimes
from bot.platforms.feishu import FeishuConfig, FeishuPlatform, build_feishu_platform
from bot.platforms.feishu.handlers import WORKING
from bot.settings import Settings
from storage import AuditLog, Database
from tests.fakes.asgi_server import AsgiServer, serve_in_loop
from tests.fakes.feishu_api import FakeFeishuApi, Message
from tests.fakes.feishu_signing import (
    SignedRequest,
    bot_mention,
    card_action_event,
    message_event,
    sign_event,
)

BOTH_LANGUAGES = {"zh_cn": "已收到，正在记录你的回复。卡片会显示结果。", "en_us": WORKING}
RECEIVED = {"type": "info", "content": WORKING, "i18n": BOTH_LANGUAGES}
"""The toast of a click that was stored and is still being decided."""
TOAST_TYPES = ("success", "info", "error")


def toast_text(response: httpx.Response) -> str:
    """The content of a callback reply's toast (the card's language)."""
    return str(response.json()["toast"]["content"])
ENCRYPT_KEY = "test-encrypt-key"
VERIFICATION_TOKEN = "test-verification-token"
APP_SECRET = "test-app-secret"
APPROVALS = "oc_approvals"
ORIGIN = "oc_origin"
ALICE = "ou_alice"  # listed by email, resolved at start-up
ALICE_EMAIL = "alice@example.com"
BOB = "ou_bob"  # listed by open_id
CAROL = "ou_carol"  # member of the approvals chat
MALLORY = "ou_mallory"  # nobody
STARTER = "ou_starter"
STARTERS: dict[str, Any] = {"feishu": {"users": [STARTER]}}
"""Who may start the test agents: only ``STARTER``."""

FILE_ARGS: dict[str, Any] = {
    "question": "Upload the incident report",
    "fields": [{"type": "file", "name": "report", "label": "Report", "required": True}],
    "actions": [{"id": "submit", "label": "Send"}],
}


class FileAskingRuntime:
    """Asks once for a file, then finishes with the result as JSON text."""

    name = "upload"

    async def run(self, prompt: str) -> Outcome:
        call = DeferredToolCallPayload(tool_call_id="call_1", tool_name="ask_human",
                                       args=FILE_ARGS)
        return Outcome.asking(call, {"prompt": prompt})

    async def resume(
        self, snapshot: dict[str, JsonValue], results: dict[str, AskHumanToolResult]
    ) -> Outcome:
        got = results["call_1"].model_dump(mode="json")
        return Outcome.finished("GOT " + json.dumps(got, sort_keys=True), snapshot)


def make_settings(db_url: str, locale: str = "en", **route: Any) -> Settings:
    feishu: dict[str, Any] = {
        "chat_id": APPROVALS,
        "approvers": {"users": [ALICE_EMAIL, BOB], "channel_members": True},
    }
    feishu.update(route)
    return Settings.model_validate({
        "database_url": db_url,
        "agents": {
            "deploy": {"model": "scripted:deploy", "route": "ops", "starters": STARTERS},
            "upload": {"model": "scripted:deploy", "route": "ops", "starters": STARTERS,
                       "ask_human": {"allow_file_fields": True, "allowed_field_types": [
                           "paragraph", "select", "file", "file-list"]}},
        },
        "routes": {"ops": {"timeout": "30m", "locale": locale, "feishu": feishu}},
    })


def runtimes(settings: Settings) -> Any:
    default = registry_runtimes(settings)
    return lambda name: FileAskingRuntime() if name == "upload" else default(name)


def make_config(fake_url: str, app_id: str, mode: str = "http", **kw: Any) -> FeishuConfig:
    values: dict[str, Any] = {
        "app_id": app_id,
        "app_secret": APP_SECRET,
        "mode": mode,
        "domain": fake_url,
        "encrypt_key": ENCRYPT_KEY,
        "verification_token": VERIFICATION_TOKEN,
        "max_attempts": 3,
        "backoff_base_seconds": 0.01,
        "backoff_max_seconds": 0.05,
        "request_timeout_seconds": 5.0,
    }
    values.update(kw)
    return FeishuConfig(**values)


TEST_INLINE_SECONDS = 1.0
"""The inline decision budget in these tests (production: 150 ms, measured in
``benchmarks/feishu_ack.py``). On a loaded CI machine one lone click's decision can
take longer than 150 ms, and its true toast is then "received": tests that assert the
outcome in the toast need it decided inline every time. Tests of the budget itself set
their own (``test_batch``), or hold the decision back (``test_click_durability``)."""


@pytest.fixture(autouse=True)
def roomy_inline_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.platforms.feishu.handlers import click_store

    monkeypatch.setattr(click_store, "INLINE_SECONDS", TEST_INLINE_SECONDS)


@pytest.fixture
def fake_api() -> Iterator[tuple[FakeFeishuApi, str]]:
    # A unique app id per test: lark-oapi caches tenant tokens process-wide by app id.
    fake = FakeFeishuApi(
        app_id=f"cli_{uuid.uuid4().hex[:12]}",
        app_secret=APP_SECRET,
        users={ALICE_EMAIL: ALICE},
        chats={APPROVALS: [CAROL, STARTER], ORIGIN: [STARTER, ALICE]},
        names={ALICE: "Alice Chen", BOB: "Bob Li"},  # Carol is outside the contact range
    )
    with AsgiServer(fake.app) as server:
        yield fake, server.url


class ResponseClock:
    """ASGI middleware: when each /feishu/events response finished sending (monotonic)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.sent: list[float] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/feishu/events":
            await self.app(scope, receive, send)
            return

        async def timed_send(message: Any) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                self.sent.append(time.monotonic())

        await self.app(scope, receive, timed_send)


@dataclass
class Feishu:
    """A running system plus helpers that talk to it the way Feishu does."""

    fake: FakeFeishuApi
    engine: Engine
    database: Database
    platform: FeishuPlatform
    url: str = ""
    http: httpx.AsyncClient | None = None
    clock: ResponseClock | None = None
    seen_cards: set[str] = field(default_factory=set)

    # ---------------------------------------------------------------- HTTP callbacks
    async def post_signed(self, signed: SignedRequest) -> httpx.Response:
        assert self.http is not None
        return await self.http.post(
            self.url + "/feishu/events", content=signed.body, headers=signed.headers
        )

    async def post_event(self, payload: dict[str, Any], **sign: Any) -> httpx.Response:
        return await self.post_signed(sign_event(payload, ENCRYPT_KEY, **sign))

    async def send_text(self, text: str, user: str = STARTER, **kw: Any) -> str:
        """Post an @-mention message in the origin group; returns its message id."""
        kw.setdefault("chat_id", ORIGIN)
        kw.setdefault("mentions", [bot_mention()])
        event = message_event(token=VERIFICATION_TOKEN, sender=user, text=text,
                              app_id=self.fake.app_id, **kw)
        response = await self.post_event(event)
        assert response.status_code == 200, response.text
        return str(event["event"]["message"]["message_id"])

    async def click(self, card: Message, expect: str | None = None,
                    **kw: Any) -> httpx.Response:
        """Click like Feishu does: a toast comes at once (``expect``: its type, when
        given); then wait until it is decided and the clicker told (``settle``)."""
        response = await self.post_event(self.click_event(card, **kw))
        assert response.status_code == 200, response.text
        shown = response.json()["toast"]
        assert shown["type"] in TOAST_TYPES and shown["content"], response.text
        if expect is not None:
            assert shown["type"] == expect, response.text
        await self.settle()
        return response

    def told_here(self, user: str, chat: str = APPROVALS) -> list[str]:
        """What the bot told ``user`` in ``chat`` with a card only they see (ephemeral)."""
        return [e.text for e in list(self.fake.ephemerals)
                if e.open_id == user and e.chat_id == chat]

    async def settle(self) -> None:
        """Wait until the clicks answered so far are decided and their clickers told."""
        await self.platform.handlers.drain()

    def told(self, user: str) -> list[str]:
        """What the bot told ``user`` privately (their chat with the bot), oldest first."""
        return [str(json.loads(m.content)["text"]) for m in list(self.fake.messages.values())
                if m.chat_id == f"oc_p2p_{user}" and m.msg_type == "text"]

    def click_event(
        self,
        card: Message,
        operator: str = ALICE,
        action: str = "approve",
        form_value: dict[str, Any] | None = None,
        ref: str | None = None,
        **kw: Any,
    ) -> dict[str, Any]:
        value = {"r": ref or card_ref(card), "a": action}
        if form_value is None:
            form_value = {"f_environment": "o1", "f_comment": "lgtm"}
        return card_action_event(
            token=VERIFICATION_TOKEN, operator=operator, value=value, form_value=form_value,
            message_id=card.message_id, chat_id=card.chat_id, app_id=self.fake.app_id, **kw,
        )

    # ---------------------------------------------------------------- observations
    async def wait_card(self, chat_id: str = APPROVALS, timeout: float = 10.0) -> Message:
        """The next not-yet-seen interactive message created in ``chat_id``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for message in list(self.fake.messages.values()):
                if (message.chat_id == chat_id and message.msg_type == "interactive"
                        and message.parent_id is None
                        and message.message_id not in self.seen_cards
                        # ...and the engine has recorded the delivery (clicks need it).
                        and await self.engine.find_by_message("feishu", message.message_id)):
                    self.seen_cards.add(message.message_id)
                    return message
            await asyncio.sleep(0.02)
        calls = [c.endpoint for c in self.fake.calls]
        raise AssertionError(f"no card in {chat_id}; calls: {calls}")

    async def wait_reply(self, parent_id: str, timeout: float = 10.0) -> str:
        """Text of the first reply to ``parent_id``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for message in list(self.fake.messages.values()):
                if message.parent_id == parent_id:
                    return str(json.loads(message.content)["text"])
            await asyncio.sleep(0.02)
        raise AssertionError(f"no reply to {parent_id}")

    async def wait_patch(self, card: Message, timeout: float = 10.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if card.patches:
                return dict(json.loads(card.patches[-1]))
            await asyncio.sleep(0.02)
        raise AssertionError(f"card {card.message_id} was never patched")

    async def status(self, card: Message) -> str:
        current = await self.engine.card(card_ref(card))
        assert current is not None
        return current.status

    def audit_events(self) -> list[str]:
        with self.database.transaction() as session:
            return [row.event for row in session.scalars(select(AuditLog).order_by(AuditLog.id))]


def card_ref(card: Message) -> str:
    """The request ref carried by the card's submit buttons."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for behavior in node.get("behaviors", []) if node.get("tag") == "button" else []:
                if behavior.get("type") == "callback":
                    found.append(behavior["value"]["r"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(card.card(original=True))
    assert found, "the card has no callback buttons"
    return found[0]


def _engine(tmp_path: Path, **route: Any) -> tuple[Engine, Database, Settings]:
    url = f"sqlite:///{tmp_path / 'askhuman.db'}"
    settings = make_settings(url, **route)
    database = Database(url)
    database.upgrade()
    return Engine(database, settings, runtimes(settings)), database, settings


@asynccontextmanager
async def served(
    fake_api: tuple[FakeFeishuApi, str], engine: Engine, database: Database, settings: Settings
) -> AsyncIterator[Feishu]:
    """The served app (``serve``'s ``build_app`` under uvicorn) for ``settings``."""
    fake, fake_url = fake_api
    platform = build_feishu_platform(settings, engine, config=make_config(fake_url, fake.app_id))
    app = build_app(engine, [PlatformRuntime("feishu", platform.endpoints(),
                                             platform.background_tasks(),
                                             closers=[platform.aclose])])
    async with serve_in_loop(app) as url, httpx.AsyncClient(timeout=10) as http:
        yield Feishu(fake, engine, database, platform, url, http)
    database.dispose()


@pytest.fixture
async def feishu_http(
    tmp_path: Path, fake_api: tuple[FakeFeishuApi, str]
) -> AsyncIterator[Feishu]:
    """HTTP-callback mode, served by the real ``serve`` app under uvicorn."""
    fake, fake_url = fake_api
    engine, database, settings = _engine(tmp_path)
    platform = build_feishu_platform(settings, engine, config=make_config(fake_url, fake.app_id))
    runtime = PlatformRuntime("feishu", platform.endpoints(), platform.background_tasks(),
                              closers=[platform.aclose])  # as serve wires it
    clock = ResponseClock(build_app(engine, [runtime]))
    async with serve_in_loop(clock) as url, httpx.AsyncClient(timeout=10) as http:
        yield Feishu(fake, engine, database, platform, url, http, clock)
    database.dispose()


@pytest.fixture
async def feishu_ws(
    tmp_path: Path, fake_api: tuple[FakeFeishuApi, str]
) -> AsyncIterator[Feishu]:
    """Long-connection mode without a socket: events go to the SDK dispatcher directly."""
    fake, fake_url = fake_api
    engine, database, settings = _engine(tmp_path)
    config = make_config(fake_url, fake.app_id, mode="ws", encrypt_key="",
                         verification_token="")
    platform = build_feishu_platform(settings, engine, config=config)
    platform.handlers.bind_loop(asyncio.get_running_loop())
    await platform.directory.warm_up(platform.approver_entries)
    stop = asyncio.Event()
    worker = asyncio.create_task(engine.serve_forever(stop, poll_interval=0.2))
    try:
        yield Feishu(fake, engine, database, platform)
    finally:
        stop.set()
        await asyncio.wait_for(worker, 10)
        await engine.drain()
        database.dispose()
