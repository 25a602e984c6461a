"""The JSON the API returns (and webhooks send): one shape per resource."""

from __future__ import annotations

import datetime as dt
from typing import Any

from bot.api.approval_args import approval_decision
from bot.engine.external import ExternalView
from bot.engine.triggers import RunView

API = "/api/v1"


def stamp(value: dt.datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def request_json(view: ExternalView) -> dict[str, Any]:
    """A request: status, deadline and, once resolved, the ``AskHumanToolResult``."""
    body: dict[str, Any] = {
        "ref": view.ref,
        "kind": view.kind,
        "status": view.status,
        "route": view.route,
        "agent_name": view.agent_name,
        "args": view.args,
        "created_at": stamp(view.created_at),
        "deadline": stamp(view.deadline),
        "decided_at": stamp(view.decided_at),
        "decided_by": view.decided_by,
        "result": view.result,
        "context": view.context,
        "idempotency_key": view.idempotency_key,
        "links": {"self": f"{API}/requests/{view.ref}",
                  "wait": f"{API}/requests/{view.ref}?wait=60",
                  "cancel": f"{API}/requests/{view.ref}/cancel"},
    }
    if view.kind == "approval":
        body["tool_name"] = view.tool_name
        body["decision"] = approval_decision(view.status, view.result)
        if body["decision"] is not None and body["decision"]["approved"]:
            body["updated_input"] = view.updated_input or view.tool_input
    return body


def run_json(view: RunView) -> dict[str, Any]:
    return {
        "id": view.id,
        "agent": view.agent,
        "status": view.status,
        "output": view.output,
        "error": view.error,
        "created_at": stamp(view.created_at),
        "updated_at": stamp(view.updated_at),
        "requests": [{**r, "links": {"self": f"{API}/requests/{r['ref']}"}}
                     for r in view.requests],
        "links": {"self": f"{API}/runs/{view.id}"},
    }
