"""External requests: questions asked through the HTTP API or MCP, with no agent run here.

An external caller (LangGraph, ADK, Claude Code, a cron script...) asks through the
door (``bot.api``, ``bot.mcp``). The request gets a run row of its own (origin
platform ``api``, started by the API client) so delivery, approvers, reminders,
escalation, timeouts and the audit work exactly as for embedded agents. The seam is
the resume queue: when the request resolves, ``settle`` (a resume ``Settler``) completes
the resume job without any runtime, marks the run finished with the result, and —
when the caller gave a ``callback_url`` — queues a ``webhook`` outbox row in that same
transaction. Long-polls are woken by the decision's own commit (``bot.engine.waiters``).

Webhooks (``bot.engine.webhooks``) are retried far longer than platform calls (about
28 h), and each delivery keeps one id (``msg_<ref>``), so receivers can drop repeats.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import JsonValue
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bot.askhuman.schema import AskHumanSelectedAction, AskHumanToolArgs, AskHumanToolResult
from bot.engine import grant_hook, grant_use, outbox, policy, routing, store, waiting, worker
from bot.engine.cards import as_utc
from bot.engine.committer import Committer, log
from bot.engine.context import EngineContext
from bot.engine.decisions import Decider
from bot.engine.edits import CALL, edited_input, inferred_schema
from bot.engine.ports import Identity
from bot.engine.resolver import Resolver
from bot.engine.results import RespondResult
from bot.engine.resumes import ResumeJobs
from bot.engine.values import InvalidValues, check_answer
from bot.engine.waiters import Waiters
from bot.settings import RouteSettings
from bot.tools.binding import binding_hash
from bot.tools.edits import editable_schema
from renderers.tool_card import tool_approval_args, tool_approval_view, view_to_json
from renderers.words import said
from storage import ApiClient, ExternalRequest, HumanRequest, Run

EXTERNAL_PLATFORM = "api"
"""``runs.origin_platform`` / ``started_by_platform`` of external requests."""
LOCAL_PLATFORM = "mcp"
"""The platform of an answer given in the MCP client itself (elicitation)."""


Kind = Literal["ask", "approval"]


@dataclass(frozen=True)
class ApiClientInfo:
    """An API client as the door sees it (never its key or secret)."""

    id: int
    name: str
    routes: tuple[str, ...]
    agents: tuple[str, ...]
    rate_limit: int

    @property
    def identity(self) -> Identity:
        return Identity(EXTERNAL_PLATFORM, self.name, self.name)


@dataclass(frozen=True)
class ExternalAsk:
    """A validated request from a client: ``args`` already passed the guardrails."""

    client: ApiClientInfo
    route: str
    args: AskHumanToolArgs
    fingerprint: str
    kind: Kind = "ask"
    agent_name: str | None = None
    idempotency_key: str | None = None
    callback_url: str | None = None
    context: dict[str, Any] | None = None
    tool_name: str | None = None
    tool_input: dict[str, Any] | None = None
    reason: str | None = None
    """Why the caller asks approval (``POST /api/v1/approvals``), shown on the card."""
    editable: tuple[str, ...] = ()
    """Arguments approvers may change ("Edit and approve")."""
    input_schema: dict[str, Any] | None = None
    """JSON Schema of ``tool_input`` (None: types inferred from the values)."""
    trace_context: dict[str, Any] | None = None
    """The caller's checked ``traceparent``/``tracestate`` (``bot.engine.trace_context``)."""


@dataclass(frozen=True)
class ExternalView:
    """One external request as its client may see it."""

    id: int
    ref: str
    kind: str
    status: str
    """pending | submitted | timeout | cancelled | unavailable."""
    route: str
    agent_name: str
    args: dict[str, Any]
    created_at: dt.datetime
    deadline: dt.datetime | None
    decided_at: dt.datetime | None
    decided_by: dict[str, str | None] | None
    result: dict[str, Any] | None
    context: dict[str, Any] | None
    idempotency_key: str | None
    callback_url: str | None
    tool_name: str | None
    tool_input: dict[str, Any] | None
    updated_input: dict[str, Any] | None = None
    """The input as an approver edited it ("Edit and approve"), else None."""


class IdempotencyConflict(Exception):
    """The idempotency key was used before with a different body."""


@dataclass
class _Created:
    view: ExternalView
    created: bool



def client_info(row: ApiClient) -> ApiClientInfo:
    return ApiClientInfo(row.id, row.name, tuple(row.routes or ()), tuple(row.agents or ()),
                         row.rate_limit)


def view_of(request: HumanRequest, run: Run, ext: ExternalRequest) -> ExternalView:
    decided_by = None
    if request.decided_by_platform is not None:
        decided_by = {"platform": request.decided_by_platform, "user_id": request.decided_by_user,
                      "name": request.decided_by_name}
    return ExternalView(
        id=request.id, ref=request.ref, kind=ext.kind, status=request.status,
        route=request.route, agent_name=run.agent, args=dict(request.args),
        created_at=_aware(request.created_at), deadline=as_utc(request.deadline),
        decided_at=as_utc(request.decided_at), decided_by=decided_by,
        result=dict(request.result) if request.result else None,
        context=dict(ext.context) if ext.context is not None else None,
        idempotency_key=ext.idempotency_key, callback_url=ext.callback_url,
        tool_name=ext.tool_name,
        tool_input=dict(ext.tool_input) if ext.tool_input is not None else None,
        updated_input=edited_input(request.tool) if request.kind == "tool_approval" else None,
    )


def _aware(value: dt.datetime) -> dt.datetime:
    aware = as_utc(value)
    assert aware is not None
    return aware



class ExternalRequests:
    """Requests from API/MCP clients: create, read, wait, cancel, answer, settle."""

    def __init__(self, ctx: EngineContext, committer: Committer, decider: Decider,
                 resolver: Resolver, jobs: ResumeJobs, waiting: Waiters) -> None:
        self._ctx = ctx
        self._committer = committer
        self._decider = decider
        self._resolver = resolver
        self._jobs = jobs
        self._waiters = waiting

    # ------------------------------------------------------------------ clients

    async def client_by_key_hash(self, key_hash: str) -> ApiClientInfo | None:
        """The active client whose key hashes to ``key_hash`` (None: unknown or revoked)."""

        def find(session: Session) -> ApiClientInfo | None:
            row = session.scalars(select(ApiClient).where(ApiClient.key_hash == key_hash,
                                                          ApiClient.revoked_at.is_(None))).first()
            return client_info(row) if row is not None else None

        return await self._committer.read(find)

    # ------------------------------------------------------------------ create

    async def create(self, ask: ExternalAsk) -> tuple[ExternalView, bool]:
        """Store and deliver ``ask``; returns ``(view, created)``.

        The same idempotency key from the same client returns the stored request
        (``created`` False) and never a second card; with a different body it raises
        ``IdempotencyConflict``. Two racing creates with one key: the unique index
        lets one commit, the other rolls back (its card with it) and reads the winner.
        """
        try:  # group-committed: a burst of creates (and grant approvals) pays one commit
            outcome = await self._committer.grouped(lambda s: self._create_in(s, ask))
        except IntegrityError:
            if ask.idempotency_key is None:
                raise
            replay = await self._committer.read(lambda s: self._replay(s, ask))
            if replay is None:
                raise
            outcome = replay
        return outcome.view, outcome.created

    def _replay(self, session: Session, ask: ExternalAsk) -> _Created | None:
        found = session.execute(
            select(HumanRequest, Run, ExternalRequest)
            .join(ExternalRequest, ExternalRequest.request_id == HumanRequest.id)
            .join(Run, Run.id == HumanRequest.run_id)
            .where(ExternalRequest.client_id == ask.client.id,
                   ExternalRequest.idempotency_key == ask.idempotency_key)).first()
        if found is None:
            return None
        request, run, ext = found
        if ext.fingerprint != ask.fingerprint:
            raise IdempotencyConflict(ask.idempotency_key)
        return _Created(view_of(request, run, ext), created=False)

    def _create_in(self, session: Session, ask: ExternalAsk) -> _Created:
        if ask.idempotency_key is not None:
            replay = self._replay(session, ask)
            if replay is not None:
                return replay
        now = self._ctx.now()
        display = ask.client.name + (f"/{ask.agent_name}" if ask.agent_name else "")
        routed = routing.route_request(  # ``rules:``: agent is "client/agent" (authenticated)
            self._ctx.settings, agent=display, tool=ask.tool_name,
            args=ask.tool_input if ask.tool_name else ask.args.model_dump(mode="json"),
            fallback=ask.route)
        route_name, route = routed.name, routed.route
        who = ask.client.identity
        run = Run(id=uuid.uuid4().hex, agent=display, prompt=ask.args.question, status="waiting",
                  started_by_platform=who.platform, started_by_user=who.user_id,
                  started_by_name=who.display_name, origin_platform=EXTERNAL_PLATFORM,
                  origin_channel=None, origin_thread=None, created_at=now, updated_at=now,
                  trace_context=ask.trace_context)
        session.add(run)
        session.flush()
        deadline = now + dt.timedelta(seconds=route.timeout)
        approval = _approval_card(ask, display, route)
        request = store.create_request(session, now, run, f"api_{uuid.uuid4().hex[:16]}",
                                       approval[0] if approval else ask.args, route_name,
                                       route.quorum, deadline)
        policy.freeze(request, self._ctx.settings, route_name, route)
        if approval is not None:  # the same tool-approval card embedded agents get
            request.kind, request.tool, request.binding = "tool_approval", *approval[1:]
            grant_use.keep_call(request, ask.tool_input or {})
        waiting.start_clocks(request, route, now)
        ext = ExternalRequest(
            request_id=request.id, client_id=ask.client.id, kind=ask.kind,
            idempotency_key=ask.idempotency_key, fingerprint=ask.fingerprint,
            callback_url=ask.callback_url, context=ask.context, tool_name=ask.tool_name,
            tool_input=ask.tool_input, created_at=now)
        session.add(ext)
        session.flush()  # the unique (client, idempotency key) index decides here
        store.audit(session, now, "request_created", run_id=run.id, ref=request.ref, actor=who,
                    details={"route": route_name, "source": "api", "kind": ask.kind})
        if approval is not None and grant_use.approve_by_grant(
                self._ctx, session, now, run, request, call=ask.tool_input or {},
                tell_thread=False, resume=False) is not None:
            self._settle_in(session, now, run, request, ext)  # decided: nothing to resume
        else:
            outbox.enqueue(session, now, self._ctx.outbox_hold(), "deliver_request",
                           request_id=request.id, run_id=run.id, payload={"ref": request.ref})
        log.info("external request created", extra={"ref": request.ref, "client": who.user_id,
                                                    "route": ask.route, "kind": ask.kind})
        return _Created(view_of(request, run, ext), created=True)

    # ------------------------------------------------------------------ read, wait, list

    async def view(self, client_id: int, ref: str) -> ExternalView | None:
        """The request ``ref`` if ``client_id`` asked it (None otherwise: no leaks)."""

        def find(session: Session) -> ExternalView | None:
            if not ref or len(ref) > store.MAX_REF_CHARS:
                return None
            found = session.execute(
                select(HumanRequest, Run, ExternalRequest)
                .join(ExternalRequest, ExternalRequest.request_id == HumanRequest.id)
                .join(Run, Run.id == HumanRequest.run_id)
                .where(HumanRequest.ref == ref, ExternalRequest.client_id == client_id)).first()
            return view_of(*found) if found is not None else None

        return await self._committer.read(find)

    async def wait(
        self, client_id: int, ref: str, timeout: float
    ) -> ExternalView | None:
        """The request after it resolved, or after ``timeout`` seconds (long-poll).

        Waits on the resolution itself (``waiters``): registered before the first
        read, so a decision committed in between is never missed.
        """
        future = self._waiters.register(ref)
        try:
            view = await self.view(client_id, ref)
            if view is None or view.status != store.OPEN or timeout <= 0:
                return view
            recheck = self._ctx.tuning.wait_recheck
            deadline = asyncio.get_running_loop().time() + timeout
            while (left := deadline - asyncio.get_running_loop().time()) > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(future), min(left, recheck or left))
                    break
                if recheck is None:
                    break
                view = await self.view(client_id, ref)  # another process may have decided
                if view is None or view.status != store.OPEN:
                    return view
            return await self.view(client_id, ref)
        finally:
            self._waiters.discard(ref, future)

    async def list(
        self, client_id: int, *, status: str | None = None, route: str | None = None,
        before_id: int | None = None, limit: int = 50,
    ) -> list[ExternalView]:
        """The client's own requests, newest first (``before_id`` pages backwards)."""

        def find(session: Session) -> list[ExternalView]:
            query = (select(HumanRequest, Run, ExternalRequest)
                     .join(ExternalRequest, ExternalRequest.request_id == HumanRequest.id)
                     .join(Run, Run.id == HumanRequest.run_id)
                     .where(ExternalRequest.client_id == client_id))
            if status is not None:
                query = query.where(HumanRequest.status == status)
            if route is not None:
                query = query.where(HumanRequest.route == route)
            if before_id is not None:
                query = query.where(HumanRequest.id < before_id)
            query = query.order_by(HumanRequest.id.desc()).limit(limit)
            return [view_of(*row) for row in session.execute(query).all()]

        return await self._committer.read(find)

    # ------------------------------------------------------------------ cancel, answer

    async def cancel(
        self, client: ApiClientInfo, ref: str, reason: str
    ) -> RespondResult:
        """The client withdraws its own request (``cancelled`` result, webhook)."""
        if await self.view(client.id, ref) is None:
            return RespondResult("not_found", said("request.no_such"))
        return await self._decider.cancel(ref, client.identity, reason)

    async def answer(
        self, client: ApiClientInfo, ref: str, action_id: str, values: Mapping[str, JsonValue],
    ) -> RespondResult:
        """The MCP client's own user answered the form (elicitation): checked like any
        answer, decided as ``<client> (in the MCP client)`` and audited
        ``answered_locally``. Tool approvals can never be answered this way."""
        view = await self.view(client.id, ref)
        if view is None:
            return RespondResult("not_found", said("request.no_such"))
        if view.kind != "ask":
            return RespondResult("rejected", said("refused.approvals_local"))
        args = AskHumanToolArgs.model_validate(view.args)
        try:
            action, clean = check_answer(args, action_id, values)
        except InvalidValues as exc:
            return RespondResult("rejected", exc.words)
        result = AskHumanToolResult(
            status="submitted", action=AskHumanSelectedAction(id=action.id, label=action.label),
            values=clean)
        who = Identity(LOCAL_PLATFORM, client.name, f"{client.name} (in the MCP client)")
        return await self._resolver.resolve(ref, result, "answered_locally", who)

    # ------------------------------------------------------------------ settling (a ``Settler``)

    async def settle(
        self, claim: worker.Claim, run: Run, request: HumanRequest
    ) -> bool:
        """An external request resolved: finish its run and queue the webhook."""
        if run.origin_platform != EXTERNAL_PLATFORM:
            return False

        def commit(session: Session) -> None:
            now = self._ctx.now()
            worker.complete(session, claim, now)
            self._settle_in(session, now, session.get(Run, run.id), request,
                            session.get(ExternalRequest, request.id))

        try:
            await self._committer.grouped(commit)  # group-committed with other writes in flight
        except worker.LeaseLost:
            log.warning("lease lost; another worker settles the request",
                        extra={"ref": request.ref})
        except Exception as exc:
            log.exception("settling an external request failed", extra={"ref": request.ref})
            await self._jobs.retry_or_fail(claim, run.id, str(exc) or type(exc).__name__)
        return True

    def _settle_in(self, session: Session, now: dt.datetime, run: Run | None,
                   request: HumanRequest, ext: ExternalRequest | None) -> None:
        """Finish the run of resolved ``request`` with its result and queue the webhook,
        in the caller's transaction (the resume job's end, or the creating transaction
        of a request a standing grant approved)."""
        if run is not None:
            run.status, run.output, run.updated_at = "succeeded", request.result, now
        if ext is not None and ext.callback_url:
            outbox.enqueue(session, now, self._ctx.outbox_hold(), "webhook",
                           request_id=request.id, run_id=request.run_id,
                           payload={"ref": request.ref, "webhook_id": f"msg_{request.ref}"})
        store.audit(session, now, "external_settled", run_id=request.run_id, ref=request.ref,
                    details={"status": request.status,
                             "webhook": bool(ext is not None and ext.callback_url)})

    # ------------------------------------------------------------------ webhooks


def _approval_card(
    ask: ExternalAsk, agent: str, route: RouteSettings
) -> tuple[AskHumanToolArgs, dict[str, JsonValue], str] | None:
    """For ``POST /api/v1/approvals``: the tool-approval card's args, its stored view and
    the binding hash of ``tool_name(tool_input)`` (None for ordinary asks)."""
    if ask.kind != "approval" or not ask.tool_name:
        return None
    tool_input = ask.tool_input or {}
    binding = binding_hash(ask.tool_name, tool_input, {})
    why = f"Reason given: {ask.reason[:600]}" if ask.reason else ""
    schema = editable_schema(ask.editable, ask.input_schema or inferred_schema(tool_input))
    view = replace(tool_approval_view(ask.tool_name, why, tool_input, {}, binding,
                                      editable=ask.editable,
                                      schema=schema if ask.editable else None),
                   grant=grant_hook.offer(route))
    stored = view_to_json(view)
    if ask.editable:
        stored[CALL] = {"args": tool_input, "fixed": {}}
    return tool_approval_args(view, agent), stored, binding

