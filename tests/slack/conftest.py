"""End-to-end harness: fake Slack Web API + the real serve wiring under uvicorn.

``slack`` gives a running system: SQLite in a tmp dir, the engine with the scripted
``deploy`` agent, the Slack platform built by ``serve``'s starter (env vars point
the Web API at the fake), and the ASGI app served on 127.0.0.1. Requests are signed
exactly like Slack signs them.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from slack_sdk.signature import SignatureVerifier
from sqlalchemy import select

from bot.commands.serve_cmd import build_app, start_platforms
from bot.engine.core import Engine, RuntimeFactory
from bot.settings import Settings
from storage import AuditLog, Database, Delivery, HumanRequest
from tests.fakes.asgi_server import serve_in_loop
from tests.fakes.slack_api import BOT_TOKEN, TEAM_ID, FakeSlackAPI

os.environ.setdefault("SKIP_SLACK_SDK_WARNING", "1")

SIGNING_SECRET = "test-signing-secret"
APPROVALS = "C0APPROVALS"
ORIGIN = "C0ORIGIN"
ALICE = "U0ALICE"  # listed approver
BOB = "U0BOB"  # member of the approver group
CAROL = "U0CAROL"  # member of the approvals channel
MALLORY = "U0MALLORY"  # nobody
STARTER = "U0STARTER"
GROUP = "S0OPS"


def make_settings(db_url: str, **slack_route: Any) -> Settings:
    """The deploy agent routed to Slack; approvers: Alice, the ops group, channel members."""
    route: dict[str, Any] = {
        "channel": APPROVALS,
        "approvers": {"users": [ALICE], "groups": [GROUP], "channel_members": True},
    }
    route.update(slack_route)
    return Settings.model_validate(
        {
            "database_url": db_url,
            "agents": {"deploy": {"model": "scripted:deploy", "route": "ops",
                                  "starters": {"slack": {"users": [STARTER]}}}},
            "routes": {"ops": {"timeout": "30m", "slack": route}},
        }
    )


def sign(body: str, ts: str | None = None, secret: str = SIGNING_SECRET) -> dict[str, str]:
    ts = ts or str(int(time.time()))
    sig = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": sig}


@dataclass
class Slack:
    """A running system plus helpers that talk to it like Slack would."""

    url: str
    fake: FakeSlackAPI
    engine: Engine
    database: Database
    http: httpx.AsyncClient

    # ------------------------------------------------------------- requests
    async def post(
        self, body: str, content_type: str, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        return await self.http.post(
            self.url + "/slack/events",
            content=body.encode(),
            headers={"Content-Type": content_type, **sign(body), **(headers or {})},
        )

    async def command(
        self, text: str, user: str = STARTER, channel: str = ORIGIN
    ) -> httpx.Response:
        body = urlencode(
            {
                "token": "legacy",
                "team_id": TEAM_ID,
                "channel_id": channel,
                "user_id": user,
                "user_name": user.lower(),
                "command": "/askhuman",
                "text": text,
                "response_url": self.fake.response_url("cmd"),
                "trigger_id": "1.2.3",
                "api_app_id": "A0APP",
            }
        )
        return await self.post(body, "application/x-www-form-urlencoded")

    async def event(
        self, event: dict[str, Any], event_id: str, retry: int | None = None
    ) -> httpx.Response:
        body = json.dumps(
            {
                "token": "legacy",
                "team_id": TEAM_ID,
                "api_app_id": "A0APP",
                "type": "event_callback",
                "event_id": event_id,
                "event_time": int(time.time()),
                "event": event,
            }
        )
        headers = (
            {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
            if retry
            else {}
        )
        return await self.post(body, "application/json", headers)

    async def interact(self, payload: dict[str, Any], **headers: str) -> httpx.Response:
        body = "payload=" + _quote(json.dumps(payload))
        return await self.post(body, "application/x-www-form-urlencoded", headers)

    # ------------------------------------------------------------- cards
    def posted_card(self, channel: str = APPROVALS) -> tuple[str, dict[str, Any]]:
        """(ts, latest message) of the request card posted to ``channel``."""
        for call in self.fake.calls_to("chat.postMessage"):
            if call.body.get("channel") == channel and call.body.get("blocks"):
                ts = next(
                    m.ts for m in self.fake.messages.values() if m.channel == channel and m.blocks
                )
                return ts, call.body
        raise AssertionError(f"no card posted to {channel}")

    async def wait_for_card(self, channel: str = APPROVALS, timeout: float = 10) -> str:
        """Wait until a request card appears in ``channel``; returns its ts.

        Then wait (at most 2 s: some tests cut the delivery short) until askhuman has
        stored where the card is: a click in between is checked against no channel,
        and a test that clicks at once would race that commit."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for message in list(self.fake.messages.values()):
                if message.channel == channel and message.blocks:
                    await self._delivery_stored(message.ts, min(deadline, time.monotonic() + 2))
                    return message.ts
            await asyncio.sleep(0.02)
        raise AssertionError(f"no card in {channel}; calls: {[c.method for c in self.fake.calls]}")

    async def _delivery_stored(self, ts: str, until: float) -> None:
        while self.database is not None and time.monotonic() < until:
            with self.database.transaction() as session:
                if session.scalars(select(Delivery.id).where(Delivery.message_id == ts)).first():
                    return
            await asyncio.sleep(0.02)

    def card_message(self, ts: str, channel: str = APPROVALS) -> Any:
        message = self.fake.message(channel, ts)
        assert message is not None
        return message

    def buttons(self, ts: str, channel: str = APPROVALS) -> dict[str, dict[str, Any]]:
        """Buttons of the card by label."""
        out = {}
        for block in self.card_message(ts, channel).blocks:
            for element in block.get("elements", []) if block["type"] == "actions" else []:
                if element["type"] == "button":  # not the "Withdraw" overflow menu
                    out[element["text"]["text"]] = element
        return out

    def click_payload(
        self,
        ts: str,
        label: str = "Approve",
        user: str = ALICE,
        environment: str | None = "o1",
        channel: str = APPROVALS,
        action_id: str | None = None,
    ) -> dict[str, Any]:
        """A ``block_actions`` payload like Slack sends for a button on the card."""
        message = self.card_message(ts, channel)
        button = self.buttons(ts, channel).get(label, {"action_id": "x", "value": "x"})
        values: dict[str, Any] = {}
        for block in message.blocks:
            if block["type"] != "input":
                continue
            element = block["element"]
            if element["type"] == "static_select":
                selected = None
                if environment is not None:
                    selected = {"text": {"type": "plain_text", "text": "?"}, "value": environment}
                values[block["block_id"]] = {
                    element["action_id"]: {"type": "static_select", "selected_option": selected}
                }
            elif element["type"] == "plain_text_input":
                values[block["block_id"]] = {
                    element["action_id"]: {"type": "plain_text_input", "value": "lgtm"}
                }
        aid = action_id or button["action_id"]
        return {
            "type": "block_actions",
            "user": {
                "id": user,
                "username": user.lower(),
                "name": user.lower(),
                "team_id": TEAM_ID,
            },
            "api_app_id": "A0APP",
            "token": "legacy",
            "container": {
                "type": "message",
                "message_ts": ts,
                "channel_id": channel,
                "is_ephemeral": False,
            },
            "trigger_id": "111.222.333",
            "team": {"id": TEAM_ID, "domain": "fake"},
            "channel": {"id": channel, "name": "approvals"},
            "message": {
                "type": "message",
                "ts": ts,
                "text": message.text,
                "blocks": message.blocks,
            },
            "state": {"values": values},
            "response_url": self.fake.response_url("click"),
            "actions": [
                {
                    "type": "button",
                    "action_id": aid,
                    "block_id": "b",
                    "value": button.get("value", aid),
                    "text": {"type": "plain_text", "text": label},
                    "action_ts": str(time.time()),
                }
            ],
        }

    # ------------------------------------------------------------- database
    def request_row(self) -> HumanRequest:
        with self.database.transaction() as session:
            row = session.scalars(select(HumanRequest)).one()
            session.expunge(row)
            return row

    def audit(self) -> list[tuple[str, str, str | None]]:
        with self.database.transaction() as session:
            return [
                (a.event, a.outcome, a.actor_user)
                for a in session.scalars(select(AuditLog).order_by(AuditLog.id))
            ]

    async def wait_until(self, predicate: Any, timeout: float = 10, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"timed out waiting for {what or predicate}")

    def ephemerals_to(self, user: str) -> list[str]:
        texts = [
            str(c.body.get("text"))
            for c in self.fake.calls_to("chat.postEphemeral")
            if c.body.get("user") == user
        ]
        return texts + [
            str(b.get("text"))
            for b in self.fake.response_url_calls
            if b.get("response_type") == "ephemeral"
        ]


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


@pytest.fixture
def fake_slack() -> Iterator[FakeSlackAPI]:
    with FakeSlackAPI(token=BOT_TOKEN) as fake:
        fake.add_users([ALICE, BOB, CAROL, MALLORY, STARTER])
        fake.group_members[GROUP] = [BOB]
        fake.channel_members[APPROVALS] = [CAROL, "UBOT"]
        yield fake


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(f"sqlite:///{tmp_path / 'askhuman.db'}")


@asynccontextmanager
async def running_system(
    fake_slack: FakeSlackAPI, settings: Settings, runtimes: RuntimeFactory | None = None,
    **engine_knobs: Any,
) -> AsyncIterator[Slack]:
    """Database, engine, Slack platform and ASGI app exactly as ``serve`` wires them
    (``engine_knobs``: Engine keyword arguments such as short leases)."""
    database = Database(settings.database_url)
    database.upgrade()
    engine = Engine(database, settings, runtimes, **engine_knobs)
    env = {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": fake_slack.base_url,
    }
    app = build_app(engine, start_platforms(engine, settings, env))
    async with serve_in_loop(app) as url, httpx.AsyncClient(timeout=30) as http:
        yield Slack(url=url, fake=fake_slack, engine=engine, database=database, http=http)
    database.dispose()


@pytest.fixture
async def slack(fake_slack: FakeSlackAPI, settings: Settings) -> AsyncIterator[Slack]:
    async with running_system(fake_slack, settings) as system:
        yield system
