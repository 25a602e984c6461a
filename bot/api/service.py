"""The door's operations, shared by the HTTP routes and the in-process MCP server.

Every method takes the authenticated ``ApiClientInfo`` and raises ``Problem`` for
anything the caller must fix, so both transports report the same errors. ask_human
args go through ``validate_and_normalize_args`` — the tool's own guardrails, with
the client's limits — and a refusal carries Dify's exact error text.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

from pydantic import ValidationError

from bot.api.approval_args import approval_request
from bot.api.bodies import (
    MAX_CONTEXT_CHARS,
    MAX_KEY_CHARS,
    AnswerBody,
    ApprovalBody,
    AskBody,
    CancelBody,
    RunBody,
    parse,
)
from bot.api.callbacks import CallbackPolicy, CallbackRefused
from bot.api.problems import Problem
from bot.askhuman.args import validate_and_normalize_args
from bot.askhuman.schema import AskHumanToolArgs
from bot.engine.core import Engine
from bot.engine.external import ApiClientInfo, ExternalAsk, ExternalView, IdempotencyConflict
from bot.engine.triggers import RunView, origin_for_route
from bot.settings import Settings

MAX_WAIT_SECONDS = 60.0
STATUSES = ("pending", "submitted", "timeout", "cancelled", "unavailable")


def idempotency_key_header(value: str | None) -> str | None:
    """The ``Idempotency-Key`` header, held to the body key's length (422 otherwise)."""
    if value is not None and not 1 <= len(value) <= MAX_KEY_CHARS:
        raise Problem(422, "invalid-header", "The Idempotency-Key header must be 1 to "
                      f"{MAX_KEY_CHARS} characters.")
    return value


def fingerprint(data: dict[str, Any]) -> str:
    """What makes two creates "the same request" (the idempotency key aside)."""
    canonical = {k: v for k, v in data.items() if k != "idempotency_key"}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def encode_cursor(request_id: int) -> str:
    return base64.urlsafe_b64encode(str(request_id).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        text = ""
    if not text.isdigit() or len(text) > 18:
        raise Problem(400, "bad-cursor", "cursor is not one this API handed out.")
    return int(text)


class Door:
    """The operations behind ``/api/v1`` and the MCP tools."""

    def __init__(self, engine: Engine, settings: Settings, policy: CallbackPolicy,
                 webhooks_enabled: bool = True) -> None:
        self.engine = engine
        self.policy = policy
        self.webhooks_enabled = webhooks_enabled

    @property
    def settings(self) -> Settings:
        """The engine's current config: a reload (``bot.reload``) is seen at once."""
        return self.engine.settings

    # ------------------------------------------------------------------ checks

    def check_route(self, client: ApiClientInfo, route: str) -> None:
        if route not in client.routes:
            raise Problem(403, "route-not-allowed",
                          f"This API client may not use route '{route}' (its routes: "
                          f"{', '.join(client.routes) or 'none'}).")
        if route not in self.settings.routes:
            raise Problem(422, "unknown-route", f"Route '{route}' is not configured on this "
                          "server; ask an admin.")
        if self.settings.retired_route(route):
            raise Problem(422, "retired-route", f"Route '{route}' was removed from this "
                          "server's configuration: it takes no new requests (its open "
                          "requests still finish).")

    def check_args(self, client: ApiClientInfo, raw: dict[str, Any]) -> AskHumanToolArgs:
        """The ask_human guardrails, with Dify's error texts (as the tool's ModelRetry)."""
        try:
            return validate_and_normalize_args(raw, self.settings.api.limits_for(client.name),
                                               strict=True)
        except ValidationError as exc:
            errors = [{"key": ".".join(str(p) for p in e["loc"]), "message": e["msg"]}
                      for e in exc.errors()]
            raise Problem(422, "invalid-args", str(exc), errors=errors) from None
        except ValueError as exc:
            raise Problem(422, "invalid-args", str(exc)) from None

    async def check_callback(self, url: str | None) -> None:
        if url is None:
            return
        if not self.webhooks_enabled:
            raise Problem(422, "webhooks-off", "This server cannot sign webhooks "
                          "(ASKHUMAN_SECRET_KEY is not set); long-poll instead, or ask an "
                          "admin.")
        try:
            await self.policy.resolve(url)
        except CallbackRefused as exc:
            raise Problem(422, "callback-refused", str(exc)) from None

    @staticmethod
    def check_context(context: dict[str, Any] | None) -> None:
        if context is not None and len(json.dumps(context)) > MAX_CONTEXT_CHARS:
            raise Problem(422, "invalid-body", f"context must be at most {MAX_CONTEXT_CHARS} "
                          "characters as JSON.")

    # ------------------------------------------------------------------ requests

    async def ask(self, client: ApiClientInfo, data: dict[str, Any],
                  idempotency_header: str | None = None,
                  trace: dict[str, Any] | None = None) -> tuple[ExternalView, bool]:
        header_key = idempotency_key_header(idempotency_header)
        body: AskBody = parse(AskBody, data)
        key = body.idempotency_key or header_key
        self.check_route(client, body.route)
        args = self.check_args(client, body.args)
        self.check_context(body.context)
        await self.check_callback(body.callback_url)
        ask = ExternalAsk(client=client, route=body.route, args=args, fingerprint=fingerprint(
            data), agent_name=body.agent_name, idempotency_key=key,
            callback_url=body.callback_url, context=body.context, trace_context=trace)
        return await self._create(ask)

    async def approval(self, client: ApiClientInfo, data: dict[str, Any],
                       idempotency_header: str | None = None,
                       trace: dict[str, Any] | None = None) -> tuple[ExternalView, bool]:
        header_key = idempotency_key_header(idempotency_header)
        body: ApprovalBody = parse(ApprovalBody, data)
        key = body.idempotency_key or header_key
        self.check_route(client, body.route)
        self.check_context(body.context)
        try:
            args = approval_request(body.tool_name, body.args, body.reason)
        except ValueError as exc:
            raise Problem(422, "invalid-args", str(exc)) from None
        await self.check_callback(body.callback_url)
        ask = ExternalAsk(client=client, route=body.route, args=args, kind="approval",
                          fingerprint=fingerprint(data), agent_name=body.agent_name,
                          idempotency_key=key, callback_url=body.callback_url,
                          context=body.context, tool_name=body.tool_name, tool_input=body.args,
                          reason=body.reason, editable=tuple(body.editable),
                          input_schema=body.input_schema, trace_context=trace)
        return await self._create(ask)

    async def _create(self, ask: ExternalAsk) -> tuple[ExternalView, bool]:
        try:
            return await self.engine.create_external(ask)
        except IdempotencyConflict:
            raise Problem(409, "idempotency-conflict", "This idempotency_key was already used "
                          "with a different request body.") from None

    async def get(self, client: ApiClientInfo, ref: str, wait: float = 0.0) -> ExternalView:
        wait = min(max(wait, 0.0), MAX_WAIT_SECONDS)
        view = await self.engine.wait_external(client.id, ref, wait)
        if view is None:
            raise Problem(404, "not-found", "No such request for this API client.")
        return view

    async def list(self, client: ApiClientInfo, status: str | None, route: str | None,
                   cursor: str | None, limit: int) -> tuple[list[ExternalView], str | None]:
        if status == "open":
            status = "pending"
        if status == "all":
            status = None
        if status is not None and status not in STATUSES:
            raise Problem(400, "bad-query", f"status must be one of open, all, "
                          f"{', '.join(STATUSES)}.")
        if not 1 <= limit <= 100:
            raise Problem(400, "bad-query", "limit must be between 1 and 100.")
        before = decode_cursor(cursor) if cursor is not None else None
        views = await self.engine.list_external(client.id, status=status, route=route,
                                                before_id=before, limit=limit + 1)
        more = len(views) > limit
        views = views[:limit]
        return views, encode_cursor(views[-1].id) if more and views else None

    async def cancel(self, client: ApiClientInfo, ref: str, data: dict[str, Any]) -> ExternalView:
        body: CancelBody = parse(CancelBody, data)
        answer = await self.engine.cancel_external(client, ref, body.reason)
        if answer.outcome == "not_found":
            raise Problem(404, "not-found", "No such request for this API client.")
        view = await self.get(client, ref)
        if answer.outcome == "already_decided":
            raise Problem(409, "already-resolved", answer.message, status_now=view.status)
        if answer.outcome == "rejected":
            raise Problem(403, "not-allowed", answer.message)
        return view

    async def answer(self, client: ApiClientInfo, ref: str, data: dict[str, Any]) -> ExternalView:
        """The caller's own user answered (MCP elicitation); approvals never."""
        if not self.settings.api.local_answers:
            raise Problem(403, "local-answers-off", "Local answers are turned off "
                          "(api.local_answers: false).")
        body: AnswerBody = parse(AnswerBody, data)
        answer = await self.engine.answer_external(client, ref, body.action, body.values)
        if answer.outcome == "not_found":
            raise Problem(404, "not-found", "No such request for this API client.")
        if answer.outcome == "already_decided":
            raise Problem(409, "already-resolved", answer.message)
        if answer.outcome == "rejected":
            raise Problem(422, "invalid-answer", answer.message)
        return await self.get(client, ref)

    # ------------------------------------------------------------------ runs

    async def start_run(self, client: ApiClientInfo, data: dict[str, Any],
                        trace: dict[str, Any] | None = None) -> RunView:
        body: RunBody = parse(RunBody, data)
        if body.agent not in client.agents:
            raise Problem(403, "agent-not-allowed",
                          f"This API client may not start agent '{body.agent}' (its agents: "
                          f"{', '.join(client.agents) or 'none'}).")
        agent = self.settings.agent(body.agent)
        if agent is None and self.settings.retired_agent(body.agent):
            raise Problem(422, "retired-agent", f"Agent '{body.agent}' was removed from this "
                          "server's configuration: it takes no new runs (its open requests "
                          "still finish).")
        if agent is None:
            raise Problem(422, "unknown-agent", f"Agent '{body.agent}' is not configured on "
                          "this server; ask an admin.")
        route = body.route or agent.route
        if body.route is not None:
            self.check_route(client, route)
        origin = origin_for_route(dict(self.settings.routes), route)
        run_id = await self.engine.start_triggered_run(
            body.agent, body.prompt, client.identity, origin, source="api", client_id=client.id,
            trace_context=trace)
        view = await self.engine.run_view(client.id, run_id)
        assert view is not None
        return view

    async def run(self, client: ApiClientInfo, run_id: str) -> RunView:
        view = await self.engine.run_view(client.id, run_id)
        if view is None:
            raise Problem(404, "not-found", "No such run for this API client.")
        return view
