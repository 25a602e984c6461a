"""The door end to end: ``askhuman serve``'s app on loopback with fake Slack and Feishu.

``door`` gives a running system (SQLite by default): the engine, the Slack and Feishu
platforms and the API/MCP routes exactly as ``serve`` wires them, plus API clients
created like ``askhuman api-key create`` does. Clicks are signed like Slack and
Feishu sign them; webhooks go to a loopback receiver and are verified with the
``standardwebhooks`` library.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.api.keys import SecretBox, hash_key, key_prefix, new_api_key, new_webhook_secret
from bot.commands.serve_cmd import build_app, start_platforms
from bot.engine import api_clients
from bot.engine.core import Engine, RuntimeFactory
from bot.engine.external import ApiClientInfo
from bot.settings import Settings
from storage import Database
from tests.fakes.asgi_server import AsgiServer, serve_in_loop
from tests.fakes.feishu_api import FakeFeishuApi, Message
from tests.fakes.feishu_signing import card_action_event, sign_event
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackAPI
from tests.slack.conftest import ALICE, APPROVALS, MALLORY, STARTER, Slack

os.environ.setdefault("SKIP_SLACK_SDK_WARNING", "1")

SECRET_KEY = "test-secret-key-for-webhook-secrets"
SIGNING_SECRET = "test-signing-secret"
FEISHU_APPROVALS = "oc_approvals"
FEISHU_ALICE = "ou_alice"
FIN = "C0FIN"
QUICK = "C0QUICK"
ENCRYPT_KEY = "test-encrypt-key"
VERIFICATION_TOKEN = "test-verification-token"

DEPLOY_ARGS: dict[str, Any] = {
    "title": "Deploy v1.2.3?",
    "question": "Can I deploy v1.2.3 to production?",
    "fields": [
        {"type": "select", "name": "environment", "label": "Environment", "required": True,
         "options": [{"value": "staging", "label": "Staging"},
                     {"value": "production", "label": "Production"}]},
        {"type": "paragraph", "name": "comment", "label": "Comment"},
    ],
    "actions": [{"id": "approve", "label": "Approve", "style": "primary"},
                {"id": "reject", "label": "Reject", "style": "destructive"}],
}


def make_settings(db_url: str, **api: Any) -> Settings:
    """Route ``ops`` on Slack and Feishu, ``fin`` on Slack; the scripted deploy agent."""
    api_settings: dict[str, Any] = {"callback_hosts": ["127.0.0.1"], "mcp_progress_seconds": 0.3}
    api_settings.update(api)
    return Settings.model_validate({
        "database_url": db_url,
        "agents": {"deploy": {"model": "scripted:deploy", "route": "ops"}},
        "routes": {
            "ops": {"timeout": "30m",
                    "slack": {"channel": APPROVALS, "approvers": {"users": [ALICE]}},
                    "feishu": {"chat_id": FEISHU_APPROVALS,
                               "approvers": {"users": [FEISHU_ALICE]}}},
            "fin": {"timeout": "30m",
                    "slack": {"channel": FIN, "approvers": {"users": [ALICE]}}},
            "quick": {"timeout": 1,
                      "slack": {"channel": QUICK, "approvers": {"users": [ALICE]}}},
        },
        "api": api_settings,
    })


@dataclass
class Client:
    info: ApiClientInfo
    key: str
    secret: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


def add_client(database: Database, name: str, routes: list[str], agents: list[str] | None = None,
               rate_limit: int = 600) -> Client:
    """What ``askhuman api-key create`` stores (hash + sealed secret)."""
    key, secret = new_api_key(), new_webhook_secret()
    box = SecretBox(SECRET_KEY)
    info = api_clients.create(database, name, hash_key(key), key_prefix(key),
                              box.seal(secret, name), routes, agents or [], rate_limit)
    return Client(info, key, secret)


@dataclass
class Receiver:
    """A webhook receiver on loopback: records every delivery (headers, raw body)."""

    status: int = 200
    got: list[tuple[dict[str, str], bytes]] = field(default_factory=list)

    def app(self) -> Starlette:
        async def hook(request: Request) -> Response:
            self.got.append((dict(request.headers), await request.body()))
            return JSONResponse({"ok": True}, status_code=self.status)

        return Starlette(routes=[Route("/hook", hook, methods=["POST"])])

    async def wait(self, count: int = 1, timeout: float = 15.0) -> list[tuple[dict[str, str],
                                                                            bytes]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.got) >= count:
                return self.got
            await asyncio.sleep(0.02)
        raise AssertionError(f"{len(self.got)} webhook(s) arrived, expected {count}")


@dataclass
class Door:
    url: str
    engine: Engine
    database: Database
    http: httpx.AsyncClient
    slack: Slack
    feishu: FakeFeishuApi

    def api(self, path: str) -> str:
        return f"{self.url}/api/v1{path}"

    async def create(self, client: Client, body: dict[str, Any],
                     headers: dict[str, str] | None = None) -> httpx.Response:
        return await self.http.post(self.api("/requests"), json=body,
                                    headers={**client.headers, **(headers or {})})

    async def get(self, client: Client, ref: str, wait: float = 0) -> httpx.Response:
        return await self.http.get(self.api(f"/requests/{ref}"), params={"wait": wait},
                                   headers=client.headers)

    async def approve_in_slack(self, ts: str, label: str = "Approve", user: str = ALICE,
                               channel: str = APPROVALS) -> None:
        payload = self.slack.click_payload(ts, label, user, environment="o1", channel=channel)
        response = await self.slack.interact(payload)
        assert response.status_code == 200, response.text

    async def feishu_card(self, timeout: float = 10.0) -> Message:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for message in list(self.feishu.messages.values()):
                if message.chat_id == FEISHU_APPROVALS and message.msg_type == "interactive" \
                        and await self.engine.find_by_message("feishu", message.message_id):
                    return message
            await asyncio.sleep(0.02)
        raise AssertionError("no Feishu card")

    async def click_feishu(self, card: Message, ref: str, action: str = "approve",
                           operator: str = FEISHU_ALICE,
                           form: dict[str, Any] | None = None) -> httpx.Response:
        event = card_action_event(
            token=VERIFICATION_TOKEN, operator=operator, value={"r": ref, "a": action},
            form_value=form if form is not None else {"f_environment": "o1"},
            message_id=card.message_id, chat_id=card.chat_id, app_id=self.feishu.app_id)
        signed = sign_event(event, ENCRYPT_KEY)
        return await self.http.post(self.url + "/feishu/events", content=signed.body,
                                    headers=signed.headers)


    def feishu_told(self, open_id: str) -> list[str]:
        """What the bot told ``open_id`` privately (their chat with it), oldest first."""
        return [str(json.loads(m.content)["text"]) for m in list(self.feishu.messages.values())
                if m.chat_id == f"oc_p2p_{open_id}" and m.msg_type == "text"]

    async def wait_feishu_told(self, open_id: str, count: int = 1,
                               timeout: float = 10.0) -> list[str]:
        """Feishu answers a click first ("received") and tells a clicker whose answer was
        not taken in private; wait for ``count`` such messages."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            told = self.feishu_told(open_id)
            if len(told) >= count:
                return told
            await asyncio.sleep(0.02)
        raise AssertionError(f"{open_id} was told {self.feishu_told(open_id)}")

    def feishu_told_anywhere(self, open_id: str) -> list[str]:
        """What the bot told ``open_id`` after a toast: ephemeral cards in a group, then
        messages in their chat with the bot."""
        return [e.text for e in list(self.feishu.ephemerals) if e.open_id == open_id] \
            + self.feishu_told(open_id)

    async def wait_told_anywhere(self, open_id: str, timeout: float = 10.0) -> list[str]:
        """Wait until ``open_id`` was told something after a toast (``feishu_told_anywhere``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            told = self.feishu_told_anywhere(open_id)
            if told:
                return told
            await asyncio.sleep(0.02)
        raise AssertionError(f"{open_id} was never told anything after the toast")

    async def feishu_refusal(self, response: httpx.Response, open_id: str,
                             timeout: float = 10.0) -> str:
        """The refusal a Feishu clicker learns: in the toast itself (an error, when it
        was known before the toast), or, when the toast only said "received" (decided
        after it: a burst, or a decision slower than the inline budget), told to them
        right after. Both are true answers; the timing decides which one comes."""
        toast = response.json()["toast"]
        if toast["type"] == "error":
            return str(toast["content"])
        assert toast["type"] == "info", toast  # never a success for a refused click
        return (await self.wait_told_anywhere(open_id, timeout))[-1]

    @staticmethod
    def feishu_taken(response: httpx.Response) -> dict[str, Any]:
        """The toast of a Feishu click that was taken: a success (decided before the
        toast), or "received" (stored, decided after it); never an error."""
        toast = dict(response.json()["toast"])
        assert toast["type"] in ("success", "info"), toast
        return toast


def env_for(fake_slack: FakeSlackAPI, feishu_url: str, feishu: FakeFeishuApi) -> dict[str, str]:
    return {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": fake_slack.base_url,
        "FEISHU_APP_ID": feishu.app_id,
        "FEISHU_APP_SECRET": feishu.app_secret,
        "FEISHU_MODE": "http",
        "FEISHU_DOMAIN": feishu_url,
        "FEISHU_ENCRYPT_KEY": ENCRYPT_KEY,
        "FEISHU_VERIFICATION_TOKEN": VERIFICATION_TOKEN,
        "ASKHUMAN_SECRET_KEY": SECRET_KEY,
    }


@pytest.fixture
def fake_slack() -> Iterator[FakeSlackAPI]:
    with FakeSlackAPI(token=BOT_TOKEN) as fake:
        fake.add_users([ALICE, MALLORY, STARTER])
        yield fake


@pytest.fixture
def fake_feishu() -> Iterator[tuple[FakeFeishuApi, str]]:
    fake = FakeFeishuApi(app_id=f"cli_{uuid.uuid4().hex[:12]}", app_secret="feishu-secret",
                         chats={FEISHU_APPROVALS: [FEISHU_ALICE]})
    with AsgiServer(fake.app) as server:
        yield fake, server.url


@asynccontextmanager
async def running_door(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], settings: Settings,
    runtimes: RuntimeFactory | None = None, webhook_backoff: tuple[float, ...] = (0.3,),
) -> AsyncIterator[Door]:
    database = Database(settings.database_url)
    database.upgrade()
    engine = Engine(database, settings, runtimes)
    engine.tuning.webhook_backoff = webhook_backoff
    feishu, feishu_url = fake_feishu
    app = build_app(engine, start_platforms(engine, settings,
                                            env_for(fake_slack, feishu_url, feishu)))
    async with serve_in_loop(app) as url, httpx.AsyncClient(timeout=90) as http:
        slack = Slack(url=url, fake=fake_slack, engine=engine, database=database, http=http)
        yield Door(url, engine, database, http, slack, feishu)
    database.dispose()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(f"sqlite:///{tmp_path / 'askhuman.db'}")


@pytest.fixture
async def door(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], settings: Settings
) -> AsyncIterator[Door]:
    async with running_door(fake_slack, fake_feishu, settings) as system:
        yield system


@pytest.fixture
def ci(door: Door) -> Client:
    """A client for routes ops and fin that may start the deploy agent."""
    return add_client(door.database, "ci-bot", ["ops", "fin", "quick"], ["deploy"])


def webhook_json(body: bytes) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(body)
    return data
