"""A served askhuman with the loopback Slack fake, steered over HTTP: for the framework
integration tests, which run in another virtual environment and must not import the server.

Run with the server's venv: ``.venv/bin/python -m tests.fakes.served_askhuman``. It
serves ``askhuman serve``'s app (SQLite in a temporary folder, Slack only) and a small
control app, prints one JSON line (``url``, ``api_key``, ``control``) and runs until
its stdin closes. The control app lets a test do what a person in Slack does: see the
cards, click a button (signed like Slack signs it), fill a field, edit and approve.

Routes: ``agents`` (channel ``C0AGENTS``; Reject needs a reason) and ``quick``
(channel ``C0QUICK``; requests time out after 2 seconds). Alice approves both.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bot.api.keys import SecretBox, hash_key, key_prefix, new_api_key, new_webhook_secret
from bot.commands.serve_cmd import build_app, start_platforms
from bot.engine import api_clients
from bot.engine.core import Engine
from bot.settings import Settings
from storage import Database
from tests.fakes.asgi_server import serve_in_loop
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackAPI, Message
from tests.slack.conftest import ALICE, MALLORY, SIGNING_SECRET, Slack
from tests.slack.test_tool_edits import _submission

AGENTS = "C0AGENTS"
QUICK = "C0QUICK"
SECRET_KEY = "integration-secret-key-for-webhook-secrets"


def settings(db_url: str) -> Settings:
    approvers = {"users": [ALICE]}
    return Settings.model_validate({
        "database_url": db_url,
        "agents": {"deploy": {"model": "scripted:deploy", "route": "agents"}},
        "routes": {
            "agents": {"timeout": "30m", "require_reason": ["reject"],
                       "slack": {"channel": AGENTS, "approvers": approvers}},
            "quick": {"timeout": 2, "slack": {"channel": QUICK, "approvers": approvers}},
        },
        "api": {"callback_hosts": ["127.0.0.1"]},
    })


def card_json(message: Message) -> dict[str, Any]:
    """A card as a test reads it: its text, its button labels and its input labels."""
    buttons, fields = [], []
    for block in message.blocks:
        if block["type"] == "actions":
            buttons += [e["text"]["text"] for e in block["elements"] if e["type"] == "button"]
        elif block["type"] == "input":
            fields.append(block["label"]["text"])
    return {"ts": message.ts, "channel": message.channel, "text": message.text,
            "buttons": buttons, "fields": fields, "blocks": message.blocks}


def _element_state(element: dict[str, Any], value: Any) -> dict[str, Any]:
    """What Slack puts in ``state.values`` for ``element`` holding ``value`` (a select's
    option chosen by the label a person sees)."""
    kind = element["type"]
    if kind in ("static_select", "radio_buttons"):
        chosen = next((o for o in element.get("options", [])
                       if value is not None and o["text"]["text"] == value), None)
        return {"type": kind, "selected_option": chosen}
    if kind == "checkboxes":
        return {"type": kind, "selected_options": element.get("options", []) if value else []}
    if kind == "number_input":
        return {"type": kind, "value": None if value is None else str(value)}
    return {"type": kind, "value": value}


def _field_name(block: dict[str, Any]) -> str:
    return str(block["block_id"]).split(":", 1)[-1]


def card_state(blocks: list[dict[str, Any]], values: dict[str, Any],
               reason: str | None) -> dict[str, Any]:
    """``state.values`` for a card whose inputs are filled from ``values`` (by field name
    or label); the reason input gets ``reason``."""
    state: dict[str, Any] = {}
    for block in blocks:
        if block["type"] != "input":
            continue
        label = block["label"]["text"]
        value = values.get(_field_name(block), values.get(label))
        if value is None and _field_name(block) == "reason":
            value = reason
        element = block["element"]
        state[block["block_id"]] = {element["action_id"]: _element_state(element, value)}
    return state


class Control:
    """The control app: what a person in Slack can do, as JSON endpoints."""

    def __init__(self, slack: Slack) -> None:
        self.slack = slack

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/cards", self.cards), Route("/click", self.click, methods=["POST"]),
            Route("/edit", self.edit, methods=["POST"]), Route("/thread", self.thread),
        ])

    async def cards(self, request: Request) -> JSONResponse:
        channel = request.query_params.get("channel", AGENTS)
        found = [card_json(m) for m in list(self.slack.fake.messages.values())
                 if m.channel == channel and m.blocks and m.thread_ts is None]
        return JSONResponse(found)

    async def click(self, request: Request) -> JSONResponse:
        body = await request.json()
        user = body.get("user", ALICE)
        ts, channel = body["ts"], body.get("channel", AGENTS)
        payload = self.slack.click_payload(ts, body["label"], user, None, channel)
        blocks = self.slack.card_message(ts, channel).blocks
        payload["state"] = {"values": card_state(blocks, body.get("values") or {},
                                                 body.get("reason"))}
        before = len(self.slack.ephemerals_to(user))
        response = await self.slack.interact(payload)
        await asyncio.sleep(0.3)  # what the clicker is told comes right after the ack
        return JSONResponse({"status": response.status_code, "body": response.text,
                             "told": self.slack.ephemerals_to(user)[before:]})

    async def edit(self, request: Request) -> JSONResponse:
        """Click "Edit and approve", then submit the modal with ``values``."""
        body = await request.json()
        ts, channel = body["ts"], body.get("channel", AGENTS)
        fake = self.slack.fake
        before = len(fake.views)
        opened = await self.slack.interact(
            self.slack.click_payload(ts, "Edit and approve", ALICE, None, channel))
        deadline = time.monotonic() + 10
        while len(fake.views) == before and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        if len(fake.views) == before:
            return JSONResponse({"status": opened.status_code, "body": "no modal opened"})
        submission = _submission(fake.views[-1], ALICE, None)
        values = body.get("values") or {}
        state = card_state(fake.views[-1]["blocks"], values, body.get("reason"))
        submission["view"]["state"] = {"values": state}
        response = await self.slack.interact(submission)
        return JSONResponse({"status": response.status_code, "body": response.text})

    async def thread(self, request: Request) -> JSONResponse:
        """The card's current text and every reply in its thread, oldest first."""
        channel = request.query_params.get("channel", AGENTS)
        ts = request.query_params["ts"]
        card = self.slack.fake.message(channel, ts)
        replies = self.slack.fake.thread_replies(channel, ts)
        return JSONResponse({"card": card.text if card else None,
                             "replies": [m.text for m in replies]})


def add_key(database: Database) -> str:
    """An API key for both routes, stored the way ``askhuman api-key create`` stores it."""
    key = new_api_key()
    api_clients.create(database, "integrations", hash_key(key), key_prefix(key),
                       SecretBox(SECRET_KEY).seal(new_webhook_secret(), "integrations"),
                       ["agents", "quick"], [], 6000)
    return key


async def serve(folder: Path) -> None:
    config = settings(f"sqlite:///{folder / 'askhuman.db'}")
    database = Database(config.database_url)
    database.upgrade()
    key = add_key(database)
    with FakeSlackAPI(token=BOT_TOKEN) as fake:
        fake.add_users([ALICE, MALLORY])
        engine = Engine(database, config)
        env = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET,
               "SLACK_API_URL": fake.base_url, "ASKHUMAN_SECRET_KEY": SECRET_KEY}
        app = build_app(engine, start_platforms(engine, config, env))
        async with serve_in_loop(app) as url, httpx.AsyncClient(timeout=30) as http:
            control = Control(Slack(url=url, fake=fake, engine=engine, database=database,
                                    http=http))
            async with serve_in_loop(control.app()) as control_url:
                print(json.dumps({"url": url, "api_key": key, "control": control_url}),
                      flush=True)
                await asyncio.to_thread(sys.stdin.read)  # until the test closes our stdin
    database.dispose()


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="askhuman-served-") as folder:
        asyncio.run(serve(Path(folder)))


if __name__ == "__main__":
    main()
