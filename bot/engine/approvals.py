"""Tool approvals in the engine: one request per call, one resume per step, the audit.

A model step that stops on tool calls needing approval (and maybe one ask_human call)
becomes one request per call, all in one ``batch``; ``store.resolve`` queues the
resume only when the last of them is resolved, and the resume hands the runtime every
result at once with an ``ApprovalTicket`` per tool call (the stored binding hash and
how long it waited). A tool-approval request is an ordinary request whose ``args`` the
engine wrote (Approve / Reject and an optional reason: ``renderers.tool_card``), so
delivery, approvers, quorum, timeouts, reminders, escalation and the audit are shared.

While a resumed (or fresh) run executes tools, ``EngineToolObserver`` commits a
``tool_started`` audit row before each call and a ``tool_finished`` row (ok / error)
with one short line for the run's thread after it. A process that dies mid-call
leaves ``tool_started`` without ``tool_finished``: the resume is retried from the
same snapshot, so the call runs again (at-least-once for the side effect).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.agents.base import Outcome
from bot.askhuman.schema import AskHumanToolResult
from bot.engine import grant_hook, grant_use, outbox, policy, routing, store, waiting
from bot.engine.edits import CALL, resume_edit
from bot.logs import scrub
from bot.tools.approval import ApprovalTicket, ToolApprovalRequest
from bot.tools.binding import jsonable, short
from bot.tools.observer import ToolCall, ToolDone, call_args
from renderers.tool_card import tool_approval_args, tool_approval_view, view_to_json
from storage import HumanRequest, Run

if TYPE_CHECKING:
    from bot.engine.committer import Committer
    from bot.engine.context import EngineContext
    from bot.engine.runs import OutcomeRecorder

TOOL_APPROVAL = "tool_approval"


def ask_batch(outcomes: OutcomeRecorder, ctx: EngineContext, session: Session,
              now: dt.datetime, run: Run, outcome: Outcome) -> str:
    """Store every deferred call of the step as its own request; returns the first ref."""
    batch = uuid.uuid4().hex
    refs: list[str] = []
    if outcome.deferred_call is not None:
        ref = outcomes.ask_human(session, now, run, outcome)
        request = store.get_request(session, ref)
        assert request is not None
        request.batch = batch
        refs.append(ref)
    created = [(create_tool_request(ctx, session, now, run, item, batch, settle=False), item)
               for item in outcome.approvals]
    for request, item in created:  # every sibling exists: the last one resolved resumes
        settle_or_deliver(ctx, session, now, run, request, item)
        refs.append(request.ref)
    run.status = "waiting"
    return refs[0]


def create_tool_request(ctx: EngineContext, session: Session, now: dt.datetime, run: Run,
                        item: ToolApprovalRequest, batch: str, *,
                        settle: bool = True) -> HumanRequest:
    """One tool call → a pending, delivered request on the tool's route (or the agent's),
    or one approved at once by a standing grant it matches (``settle_or_deliver``).

    Public for other doors (e.g. an HTTP API asking approval for an external agent's
    call): it writes the request, its audit row and its delivery in ``session``.
    ``settle=False`` leaves the grant check and the delivery to the caller (a model
    step's requests must all exist before one is resolved)."""
    agent = ctx.settings.agents[run.agent]
    routed = routing.route_request(ctx.settings, agent=run.agent, tool=item.tool,
                                   args=item.args, fallback=item.route or agent.route)
    route_name, route = routed.name, routed.route  # ``rules:`` may pick another route
    view = replace(tool_approval_view(item.tool, item.description, item.args, item.fixed,
                                      item.binding, editable=item.editable,
                                      schema=item.schema),
                   grant=grant_hook.offer(route), grant_scope=item.grant_scope)
    request = store.create_request(
        session, now, run, item.tool_call_id, tool_approval_args(view, run.agent), route_name,
        route.quorum, now + dt.timedelta(seconds=route.timeout))
    policy.freeze(request, ctx.settings, route_name, route)
    request.kind, request.tool = TOOL_APPROVAL, with_call(view_to_json(view), item)
    request.binding, request.batch = item.binding, batch
    grant_use.keep_call(request, grant_use.grant_call(item.args, item.fixed))
    waiting.start_clocks(request, route, now)
    store.audit(session, now, "tool_approval_requested", run_id=run.id, ref=request.ref,
                details={"route": route_name, "tool": item.tool,
                         "tool_call_id": item.tool_call_id, "binding": short(item.binding)})
    if settle:
        settle_or_deliver(ctx, session, now, run, request, item)
    return request


def settle_or_deliver(ctx: EngineContext, session: Session, now: dt.datetime, run: Run,
                      request: HumanRequest, item: ToolApprovalRequest) -> None:
    """Approve by a standing grant the call matches, else queue the card's delivery."""
    call = grant_use.grant_call(item.args, item.fixed)
    if grant_use.approve_by_grant(ctx, session, now, run, request, call=call,
                                  tell_thread=True) is None:
        outbox.enqueue(session, now, ctx.outbox_hold(), "deliver_request",
                       request_id=request.id, run_id=run.id, payload={"ref": request.ref})


def resume_inputs(
    session: Session, request: HumanRequest
) -> tuple[dict[str, AskHumanToolResult], dict[str, ApprovalTicket]]:
    """Every result of ``request``'s step, and a ticket per tool approval among them."""
    if request.batch is None:
        batch = [request]
    else:
        batch = list(session.scalars(
            select(HumanRequest)
            .where(HumanRequest.run_id == request.run_id, HumanRequest.batch == request.batch)
            .order_by(HumanRequest.id)))
    results = {r.tool_call_id: AskHumanToolResult.model_validate(r.result) for r in batch}
    tickets = {
        r.tool_call_id: ApprovalTicket(r.binding or "", _waited(r), *resume_edit(r.tool))
        for r in batch if r.kind == TOOL_APPROVAL
    }
    return results, tickets


def with_call(tool: dict[str, Any], item: ToolApprovalRequest) -> dict[str, Any]:
    """The stored view, plus (for a tool with editable arguments) the call exactly as
    hashed, so an edit can be hashed the way the runtime will (``bot.engine.edits``)."""
    if item.editable:
        tool[CALL] = {"args": jsonable(item.call_args if item.call_args is not None
                                       else item.args), "fixed": jsonable(item.fixed)}
    return tool


def _waited(request: HumanRequest) -> float:
    end = request.decided_at or request.updated_at
    return max(0.0, (end - request.created_at).total_seconds())


def run_kwargs(ctx: EngineContext, committer: Committer, agent: str,
               run_id: str) -> dict[str, Any]:
    """Extra arguments for ``runtime.run``: an observer, for agents that have tools."""
    settings = ctx.settings.agents.get(agent)
    if settings is None or not settings.tools:
        return {}
    return {"observer": EngineToolObserver(ctx, committer, run_id)}


def resume_kwargs(ctx: EngineContext, committer: Committer, agent: str, run_id: str,
                  tickets: Mapping[str, ApprovalTicket]) -> dict[str, Any]:
    """Extra arguments for ``runtime.resume`` (none for runtimes without tools)."""
    extra = run_kwargs(ctx, committer, agent, run_id)
    if tickets or extra:
        extra["tickets"] = dict(tickets)
    return extra


class EngineToolObserver:
    """Commits "tool started" / "tool finished" audit rows and the thread line."""

    def __init__(self, ctx: EngineContext, committer: Committer, run_id: str) -> None:
        self._ctx = ctx
        self._committer = committer
        self.run_id = run_id

    async def started(self, call: ToolCall) -> None:
        now = self._ctx.now()
        details = {"tool": call.tool, "tool_call_id": call.tool_call_id,
                   "binding": short(call.binding), "args": scrub(call_args(call.args))[:500]}
        await self._committer.tx(lambda s: store.audit(
            s, now, "tool_started", run_id=self.run_id, details=details))

    async def finished(self, done: ToolDone) -> None:
        now = self._ctx.now()
        error = scrub(done.error)[:2000] if done.error else None
        details = {"tool": done.call.tool, "tool_call_id": done.call.tool_call_id,
                   "binding": short(done.call.binding), "seconds": round(done.seconds, 3)}

        def record(session: Session) -> None:
            store.audit(session, now, "tool_finished", outcome="ok" if done.ok else "error",
                        run_id=self.run_id, reason=error, details=details)
            run = session.get(Run, self.run_id)
            if run is not None:
                outbox.enqueue(session, now, self._ctx.outbox_hold(), "post_run_result",
                               run_id=run.id, platform=run.origin_platform,
                               payload={"text": scrub(done.line), "channel": run.origin_channel,
                                        "thread": run.origin_thread})

        await self._committer.tx(record)
