"""Runs: start an agent, and store what each leg ended with.

A leg ends with a final output (posted where the run started) or an ask_human call
and/or tool calls to approve (stored as requests and delivered). Resuming a run after
its requests are decided is the ``ResumeWorker``'s job (``bot.engine.resumes``).
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any, cast

from pydantic import JsonValue
from sqlalchemy import Table, bindparam, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.util import identity_key

from bot.agents.base import Outcome
from bot.askhuman.args import validate_and_normalize_args
from bot.engine import approvals, outbox, policy, routing, store, waiting
from bot.engine.cards import output_text
from bot.engine.committer import Committer, log
from bot.engine.context import EngineContext
from bot.engine.ports import Identity, Origin
from bot.engine.results import UnknownAgentError
from bot.engine.runtimes import Runtimes
from bot.engine.starters import Starters
from bot.logs import scrub
from storage import Run

_RUNS = cast(Table, Run.__table__)
_FINISH = (
    update(_RUNS).where(_RUNS.c.id == bindparam("run_id"))
    .values(status="succeeded", updated_at=bindparam("now"),
            snapshot=bindparam("new_snapshot", type_=_RUNS.c.snapshot.type),
            output=bindparam("new_output", type_=_RUNS.c.output.type)))
"""A run's last leg ended with an output (built once, see ``bot.engine.store``)."""


class OutcomeRecorder:
    """Store a leg's outcome in the caller's transaction: the output to post, or the
    requests to deliver."""

    def __init__(self, ctx: EngineContext) -> None:
        self._ctx = ctx

    def apply(self, session: Session, run_id: str, outcome: Outcome,
              known: Run | None = None, audits: list[dict[str, Any]] | None = None
              ) -> str | None:
        """Store a run leg's outcome; returns the new request's ref when the agent asked.

        ``known``: the run as read before the leg (detached), so no SELECT re-reads it;
        the fields read from it never change, and the ones written are all overwritten.
        ``audits``: a finished run's audit row goes there, for the caller to write with
        its own (``store.insert_audits``).
        """
        now = self._ctx.now()
        if outcome.kind == "output" and known is not None and not _in_session(session, run_id):
            self._finish(session, now, known, outcome, audits)
            return None
        run = _attach(session, known) if known is not None else session.get(Run, run_id)
        if run is None:
            raise LookupError(f"run {run_id} vanished")
        run.snapshot = dict(outcome.snapshot)
        run.updated_at = now
        if outcome.kind == "output":
            run.status, run.output = "succeeded", outcome.output
            store.audit(session, now, "run_succeeded", run_id=run_id, into=audits)
            self.enqueue_result(session, run)
            return None
        if outcome.approvals:  # tool calls to approve (and maybe an ask_human call)
            return approvals.ask_batch(self, self._ctx, session, now, run, outcome)
        return self.ask_human(session, now, run, outcome)

    def ask_human(self, session: Session, now: dt.datetime, run: Run, outcome: Outcome) -> str:
        """Turn the agent's ask_human call into a request on its route, queued for delivery.

        The reminder and escalation clocks start now, so the sweeps only compare times.
        """
        call = outcome.deferred_call
        if call is None:
            raise ValueError("the agent asked for a human but sent no deferred call")
        # The local runtime already enforced these guardrails; a remote runtime may
        # not have, and model-written args are untrusted wherever they come from.
        agent = self._ctx.settings.agents[run.agent]
        args = validate_and_normalize_args(_as_raw_args(call.args), agent.ask_human)
        routed = routing.route_request(self._ctx.settings, agent=run.agent, tool=None,
                                       args=args.model_dump(mode="json"), fallback=agent.route)
        route_name, route = routed.name, routed.route  # ``rules:`` may pick another route
        deadline = now + dt.timedelta(seconds=route.timeout)
        request = store.create_request(
            session, now, run, call.tool_call_id, args, route_name, route.quorum, deadline
        )
        policy.freeze(request, self._ctx.settings, route_name, route)
        waiting.start_clocks(request, route, now)
        run.status = "waiting"
        store.audit(session, now, "request_created", run_id=run.id, ref=request.ref,
                    details={"route": route_name, "tool_call_id": call.tool_call_id})
        outbox.enqueue(session, now, self._ctx.outbox_hold(), "deliver_request",
                       request_id=request.id, run_id=run.id, payload={"ref": request.ref})
        return request.ref

    def _finish(self, session: Session, now: dt.datetime, known: Run, outcome: Outcome,
                audits: list[dict[str, Any]] | None) -> None:
        """The leg ended with a final output: one Core UPDATE of the run, which stays
        detached. Merging ``known`` into the session and flushing it cost ~0.47 ms of CPU
        per resume in a busy ``serve``; its fields read here never change."""
        done = store.core(session).execute(_FINISH, {
            "run_id": known.id, "now": now, "new_snapshot": dict(outcome.snapshot),
            "new_output": outcome.output})
        if store.rowcount(done) != 1:
            raise LookupError(f"run {known.id} vanished")
        store.audit(session, now, "run_succeeded", run_id=known.id, into=audits)
        self._post(session, known, output_text(outcome.output))

    def fail(self, session: Session, run_id: str, error: str, now: dt.datetime) -> None:
        """Mark the run failed for good and queue telling its starter why."""
        run = session.get(Run, run_id)
        if run is not None:
            run.status, run.error, run.updated_at = "failed", scrub(error), now
            self.enqueue_result(session, run)

    def enqueue_result(self, session: Session, run: Run) -> None:
        """Queue posting the run's final output or failure where it started.

        The text is fixed now, in the transaction that ended the run, so a retry posts
        exactly what the run ended with.
        """
        if run.status == "succeeded":
            text = output_text(run.output)
        else:
            text = f"The run failed: {scrub(run.error or 'unknown error')}"
        self._post(session, run, text)

    def _post(self, session: Session, run: Run, text: str) -> None:
        outbox.enqueue(session, self._ctx.now(), self._ctx.outbox_hold(), "post_run_result",
                       run_id=run.id, platform=run.origin_platform,
                       payload={"text": text, "channel": run.origin_channel,
                                "thread": run.origin_thread})



class RunStarter:
    """``start``: check the starter, run the first leg, store its outcome."""

    def __init__(self, ctx: EngineContext, committer: Committer, starters: Starters,
                 runtimes: Runtimes, outcomes: OutcomeRecorder) -> None:
        self._ctx = ctx
        self._committer = committer
        self._starters = starters
        self._runtimes = runtimes
        self._outcomes = outcomes

    async def start(
        self, agent: str, prompt: str, started_by: Identity, origin: Origin, *,
        check_starters: bool = True, run_id: str | None = None,
        trace_context: dict[str, Any] | None = None,
    ) -> str:
        """Start ``agent`` on ``prompt``; returns the run id once the first leg is handled.

        The agent's outcome is handled before returning: a final output is posted to
        ``origin``; an ask_human call becomes a stored, delivered request.
        ``started_by`` must be one of the agent's ``starters`` (``StartRefusedError``,
        audited) unless ``check_starters=False``: only for callers that authenticated
        themselves otherwise (an API key, a schedule in the admin config). ``run_id``
        lets a caller that announced the id already (API runs, schedules) choose it;
        ``trace_context``: the caller's W3C context, kept on the run for its spans.
        """
        if check_starters:
            await self._starters.require(agent, started_by)
        elif self._ctx.settings.agent(agent) is None:
            known = ", ".join(sorted(a for a in self._ctx.settings.agents
                                     if self._ctx.settings.agent(a) is not None)) or "none"
            gone = self._ctx.settings.retired_agent(agent)
            raise UnknownAgentError(
                f"Agent '{agent}' was removed from the configuration: it takes no new runs "
                f"(its open requests still finish). Configured agents: {known}." if gone else
                f"Unknown agent '{agent}'. Configured agents: {known}.")
        runtime = self._runtimes.get(agent)
        run_id = run_id or uuid.uuid4().hex
        now = self._ctx.now()

        await self._committer.tx(
            lambda s: insert_run(s, now, run_id, agent, prompt, started_by, origin,
                                 trace_context))
        log.info("run started", extra={"run_id": run_id, "agent": agent})
        try:
            extra = approvals.run_kwargs(self._ctx, self._committer, agent, run_id)
            outcome = await runtime.run(prompt, **extra)
        except Exception as exc:
            log.exception("run failed", extra={"run_id": run_id})
            await self.fail(run_id, str(exc) or type(exc).__name__)
            return run_id
        try:
            await self._committer.tx(lambda s: self._outcomes.apply(s, run_id, outcome))
        except Exception as exc:
            log.exception("could not store the run outcome", extra={"run_id": run_id})
            await self.fail(run_id, str(exc) or type(exc).__name__)
        return run_id

    async def fail(self, run_id: str, error: str) -> None:
        """Mark the run failed and tell its starter (the agent crashed, or storing did)."""
        now = self._ctx.now()

        def fail(session: Session) -> None:
            self._outcomes.fail(session, run_id, error, now)
            store.audit(session, now, "run_failed", outcome="error", run_id=run_id,
                        reason=error)

        await self._committer.tx(fail)

def insert_run(session: Session, now: dt.datetime, run_id: str, agent: str, prompt: str,
               started_by: Identity, origin: Origin,
               trace_context: dict[str, Any] | None = None) -> bool:
    """Add the ``runs`` row (audited ``run_started``) unless it exists already (a stored
    start tried before); True when it was added."""
    if session.get(Run, run_id) is not None:
        return False
    session.add(
        Run(
            id=run_id, agent=agent, prompt=prompt, status="running",
            started_by_platform=started_by.platform, started_by_user=started_by.user_id,
            started_by_name=started_by.display_name, origin_platform=origin.platform,
            origin_channel=origin.channel, origin_thread=origin.thread,
            created_at=now, updated_at=now, trace_context=trace_context,
        )
    )
    store.audit(session, now, "run_started", run_id=run_id, actor=started_by,
                details={"agent": agent})
    return True


def _in_session(session: Session, run_id: str) -> bool:
    """Whether ``session`` holds its own copy of the run (a batch-mate read or changed
    it): the outcome then goes on that copy, so the transaction sees one run."""
    return session.identity_map.get(identity_key(Run, run_id)) is not None


def _attach(session: Session, run: Run) -> Run:
    """``run`` (read in an earlier, closed session) in ``session`` without a SELECT; the
    session's own copy if it has one already (a batch-mate loaded or changed it)."""
    present = session.identity_map.get(identity_key(Run, run.id))
    if isinstance(present, Run):
        return present
    return session.merge(run, load=False)


def _as_raw_args(args: JsonValue) -> str | dict[str, Any]:
    """Deferred-call args are a JSON object (or its text); anything else is refused."""
    if isinstance(args, str | dict):
        return args
    raise ValueError(f"ask_human args must be a JSON object, got {type(args).__name__}")

