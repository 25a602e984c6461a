"""Runs: start an agent, store what each leg ended with, and resume it after a decision.

A leg ends with a final output (posted where the run started) or an ask_human call
(stored as a request and delivered). Resumes come from the durable queue in
``bot.engine.worker``: a job is claimed with a short lease that a heartbeat renews
while the agent resumes outside any transaction, and the outcome is committed together
with the job's completion (a compare-and-set on the claim token), so a resume takes
effect exactly once even when workers crash or lose their lease.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from functools import partial
from typing import Any

from pydantic import JsonValue
from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session
from sqlalchemy.orm.util import identity_key

from bot import metrics
from bot.agents.base import Outcome, ToolBindingError
from bot.askhuman.schema import AskHumanToolResult
from bot.askhuman.tool import validate_and_normalize_args
from bot.engine import approvals, outbox, policy, routing, store, waiting, worker
from bot.engine.access import AccessMixin
from bot.engine.base import log
from bot.engine.cards import output_text
from bot.engine.ports import Identity, Origin
from bot.engine.results import UnknownAgentError
from bot.logs import scrub
from storage import HumanRequest, ResumeJob, Run

_REQUESTS_WITH_RUNS = (
    select(HumanRequest, Run).join(Run, Run.id == HumanRequest.run_id)
    .where(HumanRequest.id.in_(bindparam("ids", expanding=True))))
"""What claimed resumes need, read in one statement (built once)."""


class RunsMixin(AccessMixin):
    """Starting runs, applying their outcomes, and the resume loop (retry, give up)."""

    async def start_run(
        self, agent: str, prompt: str, started_by: Identity, origin: Origin, *,
        check_starters: bool = True, run_id: str | None = None,
    ) -> str:
        """Start ``agent`` on ``prompt``; returns the run id once the first leg is handled.

        The agent's outcome is handled before returning: a final output is posted to
        ``origin``; an ask_human call becomes a stored, delivered request.
        ``started_by`` must be one of the agent's ``starters`` (``StartRefusedError``,
        audited) unless ``check_starters=False``: only for callers that authenticated
        themselves otherwise (an API key, a schedule in the admin config). ``run_id``
        lets a caller that announced the id already (API runs, schedules) choose it.
        """
        if check_starters:
            await self._require_starter(agent, started_by)
        elif self.settings.agent(agent) is None:
            known = ", ".join(sorted(a for a in self.settings.agents
                                     if self.settings.agent(a) is not None)) or "none"
            gone = self.settings.retired_agent(agent)
            raise UnknownAgentError(
                f"Agent '{agent}' was removed from the configuration: it takes no new runs "
                f"(its open requests still finish). Configured agents: {known}." if gone else
                f"Unknown agent '{agent}'. Configured agents: {known}.")
        runtime = self._runtime(agent)
        run_id = run_id or uuid.uuid4().hex
        now = self.now()

        def insert(session: Session) -> None:
            session.add(
                Run(
                    id=run_id, agent=agent, prompt=prompt, status="running",
                    started_by_platform=started_by.platform, started_by_user=started_by.user_id,
                    started_by_name=started_by.display_name, origin_platform=origin.platform,
                    origin_channel=origin.channel, origin_thread=origin.thread,
                    created_at=now, updated_at=now,
                )
            )
            store.audit(session, now, "run_started", run_id=run_id, actor=started_by,
                        details={"agent": agent})

        await self._tx(insert)
        log.info("run started", extra={"run_id": run_id, "agent": agent})
        try:
            outcome = await runtime.run(prompt, **approvals.run_kwargs(self, agent, run_id))
        except Exception as exc:
            log.exception("run failed", extra={"run_id": run_id})
            await self._fail_run(run_id, str(exc) or type(exc).__name__)
            return run_id
        try:
            await self._tx(lambda s: self._apply_outcome(s, run_id, outcome))
        except Exception as exc:
            log.exception("could not store the run outcome", extra={"run_id": run_id})
            await self._fail_run(run_id, str(exc) or type(exc).__name__)
        return run_id

    def _apply_outcome(self, session: Session, run_id: str, outcome: Outcome,
                       known: Run | None = None) -> str | None:
        """Store a run leg's outcome; returns the new request's ref when the agent asked.

        ``known``: the run as read before the leg (detached), so no SELECT re-reads it;
        the fields read from it never change, and the ones written are all overwritten.
        """
        now = self.now()
        run = _attach(session, known) if known is not None else session.get(Run, run_id)
        if run is None:
            raise LookupError(f"run {run_id} vanished")
        run.snapshot = dict(outcome.snapshot)
        run.updated_at = now
        if outcome.kind == "output":
            run.status, run.output = "succeeded", outcome.output
            store.audit(session, now, "run_succeeded", run_id=run_id)
            self._enqueue_result(session, run)
            return None
        if outcome.approvals:  # tool calls to approve (and maybe an ask_human call)
            return approvals.ask_batch(self, session, now, run, outcome)
        return self._ask_human(session, now, run, outcome)

    def _ask_human(self, session: Session, now: dt.datetime, run: Run, outcome: Outcome) -> str:
        """Turn the agent's ask_human call into a request on its route, queued for delivery.

        The reminder and escalation clocks start now, so the sweeps only compare times.
        """
        call = outcome.deferred_call
        if call is None:
            raise ValueError("the agent asked for a human but sent no deferred call")
        # The local runtime already enforced these guardrails; a remote runtime may
        # not have, and model-written args are untrusted wherever they come from.
        agent = self.settings.agents[run.agent]
        args = validate_and_normalize_args(_as_raw_args(call.args), agent.ask_human)
        routed = routing.route_request(self.settings, agent=run.agent, tool=None,
                                       args=args.model_dump(mode="json"), fallback=agent.route)
        route_name, route = routed.name, routed.route  # ``rules:`` may pick another route
        deadline = now + dt.timedelta(seconds=route.timeout)
        request = store.create_request(
            session, now, run, call.tool_call_id, args, route_name, route.quorum, deadline
        )
        policy.freeze(request, self.settings, route_name, route)
        waiting.start_clocks(request, route, now)
        run.status = "waiting"
        store.audit(session, now, "request_created", run_id=run.id, ref=request.ref,
                    details={"route": route_name, "tool_call_id": call.tool_call_id})
        outbox.enqueue(session, now, self.outbox_lease, "deliver_request",
                       request_id=request.id, run_id=run.id, payload={"ref": request.ref})
        return request.ref

    def _enqueue_result(self, session: Session, run: Run) -> None:
        """Queue posting the run's final output or failure where it started.

        The text is fixed now, in the transaction that ended the run, so a retry posts
        exactly what the run ended with.
        """
        if run.status == "succeeded":
            text = output_text(run.output)
        else:
            text = f"The run failed: {scrub(run.error or 'unknown error')}"
        outbox.enqueue(session, self.now(), self.outbox_lease, "post_run_result",
                       run_id=run.id, platform=run.origin_platform,
                       payload={"text": text, "channel": run.origin_channel,
                                "thread": run.origin_thread})

    async def _fail_run(self, run_id: str, error: str) -> None:
        """Mark the run failed and tell its starter (the agent crashed, or storing did)."""
        now = self.now()

        def fail(session: Session) -> None:
            run = session.get(Run, run_id)
            if run is not None:
                run.status, run.error, run.updated_at = "failed", scrub(error), now
                self._enqueue_result(session, run)
            store.audit(session, now, "run_failed", outcome="error", run_id=run_id,
                        reason=error)

        await self._tx(fail)

    # ------------------------------------------------------------------ resume queue

    async def _resume_due(self, limit: int, concurrency: int = 1) -> int:
        """Claim and process due resume jobs until none is left (or ``limit``), up to
        ``concurrency`` at a time; returns how many ran.

        Whenever slots are free, one transaction claims that many jobs and reads their
        runs and requests (``_claim_loaded``, group-committed with whatever else is being
        written), and each job then runs under its own lease and heartbeat, so running
        several changes nothing about exactly-once: a job is held by one worker, and its
        success commits with its end. A claim that came back short is repeated only when
        a decision announced a new resume (``_poke``) or a job finished.
        """
        running: set[asyncio.Task[None]] = set()
        claimed = done = 0
        idle_at: int | None = None  # the poke count when the queue was last found empty
        crash: BaseException | None = None  # raised once the other jobs have finished
        nudge = asyncio.Event()
        self._resume_nudges.add(nudge)
        try:
            while True:
                free = min(concurrency - len(running), limit - claimed)
                if free > 0 and idle_at != self._pokes and crash is None:
                    seen = self._pokes
                    batch = await self._batched(partial(self._claim_loaded, limit=free))
                    claimed += len(batch)
                    running.update(asyncio.create_task(self._process(claim, loaded))
                                   for claim, loaded in batch)
                    if len(batch) < free:
                        idle_at = seen
                if not running:
                    if crash is not None:
                        raise crash
                    return done
                nudge.clear()
                poke = asyncio.ensure_future(nudge.wait())
                finished, _ = await asyncio.wait({*running, poke},
                                                 return_when=asyncio.FIRST_COMPLETED)
                poke.cancel()
                for task in finished - {poke}:
                    running.discard(task)
                    done += 1
                    if not task.cancelled() and task.exception() is not None:
                        crash = crash or task.exception()
                if finished - {poke}:
                    idle_at = None  # a slot freed: new jobs may be due meanwhile
        finally:
            self._resume_nudges.discard(nudge)
            for task in running:
                task.cancel()
            if running:
                await asyncio.wait(running)

    def _claim_loaded(self, session: Session, limit: int) -> list[tuple[worker.Claim, Any]]:
        """Claim up to ``limit`` jobs and read what each resume needs, in one transaction:
        one statement claims them all, one more reads their requests with their runs."""
        claims = worker.claim_batch(session, self.now(), self.lease, self.db.is_postgres, limit)
        rows = {request.id: (run, request) for request, run in session.execute(
            _REQUESTS_WITH_RUNS, {"ids": [claim.request_id for claim in claims]})
        } if claims else {}
        out: list[tuple[worker.Claim, Any]] = []
        for claim in claims:
            try:
                run, request = rows.get(claim.request_id) or (None, None)
                if run is None or request is None or run.id != claim.run_id:
                    loaded = self._resume_load(session, claim)  # raises: reported below
                else:
                    loaded = run, request, approvals.resume_inputs(session, request)
            except Exception:  # _process loads it again on its own and reports the error
                log.warning("reading a claimed resume failed", exc_info=True,
                            extra={"run_id": claim.run_id})
                loaded = None
            out.append((claim, loaded))
        return out

    def _resume_load(
        self, session: Session, claim: worker.Claim
    ) -> tuple[Run, HumanRequest, Any]:
        run, request = session.get(Run, claim.run_id), session.get(HumanRequest,
                                                                   claim.request_id)
        assert run is not None and request is not None
        return run, request, approvals.resume_inputs(session, request)

    async def _process(self, claim: worker.Claim, loaded: Any = None) -> None:
        """Resume one run with its request's result; success commits with the job's end.

        ``loaded`` is what ``_resume_load`` read in the claim's transaction (None: read
        it now)."""
        if loaded is None:
            loaded = await self._read(partial(self._resume_load, claim=claim))
        run, request, (results, tickets) = loaded
        if await self._settle_without_runtime(claim, run, request):
            return
        extra = {"run_id": run.id, "ref": request.ref, "attempt": claim.attempts}
        if claim.attempts > self.max_attempts:
            await self._give_up(claim, run.id, "the resume kept crashing the worker")
            return
        if claim.attempts == 1:  # answer -> resume started, once per decision
            metrics.observe_resume(request.decided_at, self.now())
        try:
            result = AskHumanToolResult.model_validate(request.result)
            runtime = self._runtime(run.agent)
            async with self._heartbeat(ResumeJob, claim.job_id, claim.token,
                                       self.lease) as beat:
                outcome = await beat.guard(runtime.resume(
                    dict(run.snapshot or {}), results,
                    **approvals.resume_kwargs(self, run.agent, run.id, tickets)))
        except worker.LeaseLost:
            log.warning("lease lost during the resume; another worker owns it", extra=extra)
            return
        except ToolBindingError as exc:  # not the approved call: nothing runs, no retry
            log.warning("resume refused: tool call differs", extra={**extra, "error": str(exc)})
            await approvals.refuse_binding(self, claim, run.id, exc)
            return
        except Exception as exc:
            log.warning("resume failed", extra={**extra, "error": str(exc)})
            metrics.resume_failed(run.agent)
            await self._retry_or_fail(claim, run.id, str(exc) or type(exc).__name__)
            return

        def commit(session: Session) -> None:
            worker.complete(session, claim, self.now())
            self._apply_outcome(session, run.id, outcome, known=run)
            store.audit(session, self.now(), "resumed", run_id=run.id, ref=request.ref,
                        details={"attempt": claim.attempts, "status": result.status})

        try:  # group-committed; then delivers the follow-up request / posts the output
            await self._grouped(commit)
        except worker.LeaseLost:
            log.warning("lease lost; another worker owns the resume", extra=extra)
            return
        except Exception as exc:
            log.exception("storing the resume outcome failed", extra=extra)
            await self._retry_or_fail(claim, run.id, str(exc) or type(exc).__name__)
            return
        log.info("run resumed", extra=extra)

    async def _settle_without_runtime(
        self, claim: worker.Claim, run: Run, request: HumanRequest
    ) -> bool:
        """Seam for requests with no embedded agent behind them (``bot.engine.external``):
        True when it settled the job itself, so no runtime is resumed."""
        return False

    async def _retry_or_fail(self, claim: worker.Claim, run_id: str, error: str) -> None:
        """Schedule the job again with backoff, or give up after ``max_attempts``."""
        if claim.attempts >= self.max_attempts:
            await self._give_up(claim, run_id, error)
            return
        delay = worker.backoff(claim.attempts, self.backoff_base, self.backoff_cap)

        def retry(session: Session) -> None:
            now = self.now()
            worker.retry_later(session, claim, now, delay, error)
            store.audit(session, now, "resume_retry", outcome="error", run_id=run_id,
                        reason=error, details={"attempt": claim.attempts,
                                               "delay_seconds": delay.total_seconds()})

        try:
            await self._tx(retry)
        except worker.LeaseLost:
            log.warning("lease lost while scheduling a retry", extra={"run_id": run_id})

    async def _give_up(self, claim: worker.Claim, run_id: str, error: str) -> None:
        """Fail the job and its run for good, and tell the run's starter why."""
        message = f"resuming failed after {claim.attempts} attempt(s): {error}"

        def fail(session: Session) -> None:
            now = self.now()
            worker.give_up(session, claim, now, error)
            run = session.get(Run, run_id)
            if run is not None:
                run.status, run.error, run.updated_at = "failed", scrub(message), now
                self._enqueue_result(session, run)
            store.audit(session, now, "resume_failed", outcome="error", run_id=run_id,
                        reason=message)

        try:
            await self._tx(fail)
        except worker.LeaseLost:
            return


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
