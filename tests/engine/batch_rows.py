"""Delivered requests for batch-decision tests: asked through the engine's door (as
``POST /api/v1/approvals`` and ``/asks`` do), so each gets a real card on its route."""

from __future__ import annotations

import uuid
from typing import Any

from bot.api.keys import SecretBox, hash_key, key_prefix, new_api_key, new_webhook_secret
from bot.askhuman.schema import AskHumanToolArgs
from bot.engine import api_clients
from bot.engine.core import Engine
from bot.engine.external import ApiClientInfo, ExternalAsk

SECRET_KEY = "test-secret-key-for-webhook-secrets"


def api_client(engine: Engine, routes: list[str]) -> ApiClientInfo:
    key, name = new_api_key(), f"bot-{uuid.uuid4().hex[:6]}"
    return api_clients.create(engine.db, name, hash_key(key), key_prefix(key),
                              SecretBox(SECRET_KEY).seal(new_webhook_secret(), name), routes,
                              [], 600)


async def ask_tool(engine: Engine, client: ApiClientInfo, route: str, tool: str,
                   tool_input: dict[str, Any] | None = None) -> str:
    """A tool approval (Approve / Reject, optional reason) on ``route``; its ref."""
    args = AskHumanToolArgs(question=f"Run {tool}?")
    view, _ = await engine.create_external(ExternalAsk(
        client, route, args, uuid.uuid4().hex, kind="approval", tool_name=tool,
        tool_input=tool_input or {"n": 1}))
    return view.ref


async def ask_form(engine: Engine, client: ApiClientInfo, route: str, title: str,
                   *, required_field: bool = False) -> str:
    """An ask_human request with one primary and one destructive action (and, when
    ``required_field``, a required select: then it needs its card)."""
    fields = [{"type": "select", "name": "env", "label": "Env", "required": True,
               "options": [{"value": "prod", "label": "prod"}]}] if required_field else []
    args = AskHumanToolArgs.model_validate({
        "title": title, "question": f"{title}?", "fields": fields,
        "actions": [{"id": "go", "label": "Go", "style": "primary"},
                    {"id": "stop", "label": "Stop", "style": "destructive"}]})
    view, _ = await engine.create_external(ExternalAsk(client, route, args, uuid.uuid4().hex))
    return view.ref
