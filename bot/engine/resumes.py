"""Resumes: the durable queue that resumes a run once its requests are decided.

Resumes come from the queue in ``bot.engine.worker``: a job is claimed with a short
lease that a heartbeat renews while the agent resumes outside any transaction, and the
outcome is committed together with the job's completion (a compare-and-set on the claim
token), so a resume takes effect exactly once even when workers crash or lose their
lease. Requests with no embedded agent behind them (API/MCP) are settled by a
``Settler`` instead of a runtime.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from bot import metrics
from bot.agents.base import ToolBindingError
from bot.askhuman.schema import AskHumanToolResult
from bot.engine import approvals, queued, store, tracing, worker
from bot.engine.committer import Committer, log
from bot.engine.context import EngineContext
from bot.engine.leases import Heartbeat
from bot.engine.runs import OutcomeRecorder
from bot.engine.runtimes import Runtimes
from bot.engine.wakeups import Wakeups
from bot.tools.binding import short
from storage import HumanRequest, ResumeJob, Run

_REQUESTS_WITH_RUNS = (
    select(HumanRequest, Run).join(Run, Run.id == HumanRequest.run_id)
    .where(HumanRequest.id.in_(bindparam("ids", expanding=True))))
"""What claimed resumes need, read in one statement (built once)."""


@dataclass(eq=False)
class Slot:
    """One of this process's resume slots, held by a decision across its transaction
    (``ResumeWorker.reserve``): what the transaction claimed into it starts once it has
    committed (``ResumeWorker.start``), else the slot is freed."""

    claimed: list[tuple[worker.Claim, Any]] = field(default_factory=list)
    """What ``claim_in`` claimed (at most one), as ``claim_loaded`` returns it."""
    done: bool = False
    """Started or freed: each happens once."""


class Settler(Protocol):
    """Settles a resolved request that has no agent runtime behind it."""

    async def settle(self, claim: worker.Claim, run: Run, request: HumanRequest) -> bool:
        """True when it settled the job itself, so no runtime is resumed."""
        ...


class ResumeJobs:
    """A resume job's unhappy ends: retry with backoff, give up, refuse a binding."""

    def __init__(self, ctx: EngineContext, committer: Committer,
                 outcomes: OutcomeRecorder) -> None:
        self._ctx = ctx
        self._committer = committer
        self._outcomes = outcomes

    async def retry_or_fail(self, claim: worker.Claim, run_id: str, error: str) -> None:
        """Schedule the job again with backoff, or give up after ``max_attempts``."""
        if claim.attempts >= self._ctx.tuning.max_attempts:
            await self.give_up(claim, run_id, error)
            return
        tuning = self._ctx.tuning
        delay = worker.backoff(claim.attempts, tuning.backoff_base, tuning.backoff_cap)

        def retry(session: Session) -> None:
            now = self._ctx.now()
            worker.retry_later(session, claim, now, delay, error)
            store.audit(session, now, "resume_retry", outcome="error", run_id=run_id,
                        reason=error, details={"attempt": claim.attempts,
                                               "delay_seconds": delay.total_seconds()})

        try:
            await self._committer.tx(retry)
        except worker.LeaseLost:
            log.warning("lease lost while scheduling a retry", extra={"run_id": run_id})

    async def give_up(self, claim: worker.Claim, run_id: str, error: str) -> None:
        """Fail the job and its run for good, and tell the run's starter why."""
        message = f"resuming failed after {claim.attempts} attempt(s): {error}"

        def fail(session: Session) -> None:
            now = self._ctx.now()
            worker.give_up(session, claim, now, error)
            self._outcomes.fail(session, run_id, message, now)
            store.audit(session, now, "resume_failed", outcome="error", run_id=run_id,
                        reason=message)

        try:
            await self._committer.tx(fail)
        except worker.LeaseLost:
            return

    async def refuse_binding(self, claim: worker.Claim, run_id: str,
                             exc: ToolBindingError) -> None:
        """A pending call is not the approved one: audit it, run nothing, fail the run."""
        now = self._ctx.now()
        await self._committer.tx(lambda s: store.audit(
            s, now, "tool_binding_refused", outcome="refused", run_id=run_id, reason=str(exc),
            details={"tool": exc.tool, "tool_call_id": exc.tool_call_id,
                     "approved": short(exc.approved), "pending": short(exc.pending)}))
        await self.give_up(claim, run_id, str(exc))


class ResumeWorker:
    """Claim due resume jobs, resume their runs (several at once), store the outcome."""

    def __init__(self, ctx: EngineContext, committer: Committer, runtimes: Runtimes,
                 outcomes: OutcomeRecorder, jobs: ResumeJobs, wakeups: Wakeups,
                 settlers: Sequence[Settler] = ()) -> None:
        self._ctx = ctx
        self._committer = committer
        self._runtimes = runtimes
        self._outcomes = outcomes
        self._jobs = jobs
        self._wakeups = wakeups
        self._settlers = list(settlers)
        self._effects: set[asyncio.Task[None]] = set()
        """Outcomes' after-commit work (posting the final answer, delivering a follow-up
        request) that ``due`` no longer holds a slot for; it waits for them at its end."""
        self._effect_crashes: list[BaseException] = []
        self._with_decisions = False
        """Decisions may claim their resumes (``reserve``): this process's loop runs."""
        self._held = 0
        """Slots held by decisions and the resumes they claimed (``reserve``)."""
        self._in_rounds = 0
        """Resumes ``due`` rounds are running."""
        self._short = False
        """Someone found no free slot: a slot freed by a decision pokes the loop."""
        self._inline: set[asyncio.Task[None]] = set()

    def add_settler(self, settler: Settler) -> None:
        self._settlers.append(settler)

    async def due(self, limit: int, concurrency: int = 1) -> int:
        """Claim and process due resume jobs until none is left (or ``limit``), up to
        ``concurrency`` at a time; returns how many ran.

        Whenever slots are free, one transaction claims that many jobs and reads their
        runs and requests (``claim_loaded``, group-committed with whatever else is being
        written), and each job then runs under its own lease and heartbeat, so running
        several changes nothing about exactly-once: a job is held by one worker, and its
        success commits with its end. A claim that came back short is repeated only when
        a decision announced a new resume (``Wakeups.resume_due``) or a job finished.
        A slot is free once its outcome is committed: the platform calls that outcome
        queued (the final answer, a follow-up card) go on beside the next resume, still
        through the outbox, and ``due`` returns only once they are done.
        """
        running: set[asyncio.Task[None]] = set()
        claimed = done = 0
        idle_at: int | None = None  # the poke count when the queue was last found empty
        crash: BaseException | None = None  # raised once the other jobs have finished
        nudge = asyncio.Event()
        self._wakeups.nudges.add(nudge)
        try:
            while True:
                free = min(concurrency - len(running) - self._held, limit - claimed)
                wanted = idle_at != self._wakeups.pokes and crash is None
                if free > 0 and wanted:
                    seen = self._wakeups.pokes
                    batch = await self._committer.batched(partial(self.claim_loaded, limit=free))
                    claimed += len(batch)
                    self._in_rounds += len(batch)
                    running.update(asyncio.create_task(self.process(claim, loaded,
                                                                    detach=True))
                                   for claim, loaded in batch)
                    if len(batch) < free:
                        idle_at = seen
                elif wanted and self._held:  # decisions' resumes hold the slots
                    self._short = True
                if not running:
                    crash = await self._effects_done() or crash
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
                    self._in_rounds -= 1
                    done += 1
                    if not task.cancelled() and task.exception() is not None:
                        crash = crash or task.exception()
                if finished - {poke}:
                    idle_at = None  # a slot freed: new jobs may be due meanwhile
        finally:
            self._wakeups.nudges.discard(nudge)
            self._in_rounds -= len(running)
            for task in running:
                task.cancel()
            if running:
                await asyncio.wait(running)
            await self._effects_done()

    # --------------------------------------------- a resume claimed by its decision

    def with_decisions(self, on: bool) -> None:
        """Let decisions claim their resumes while this process's resume loop runs
        (``Engine.serve_forever``); never in a process that leaves resumes to another."""
        self._with_decisions = on

    def reserve(self) -> Slot | None:
        """A free slot for a decision about to commit (``Decider``), or None (none is
        free, or this process runs no resumes). Give it back with ``release``."""
        if not self._with_decisions:
            return None
        if self._held + self._in_rounds >= self._ctx.settings.worker.resume_concurrency:
            self._short = True
            return None
        self._held += 1
        return Slot()

    def offer(self, session: Session, slot: Slot) -> None:
        """Before a decision's writes: offer ``slot`` to the resume job the transaction
        will queue, so ``store.resolve`` inserts it already claimed, exactly as the loop
        would claim it (lease, fencing token, this instance as holder). Then ``claim_in``."""
        queued.hold(session, slot)
        queued.offer(session, queued.Offer(uuid.uuid4().hex,
                                           self._ctx.now() + self._ctx.tuning.lease,
                                           self._ctx.instance_id))

    def claim_in(self, session: Session, slot: Slot) -> None:
        """After the decision's writes, in its transaction: put the job born claimed
        (``offer``) and what its resume reads into ``slot``; it starts once this commits
        (``start``), with no claim transaction of its own and no loop to wake. Rolled
        back, nothing was claimed; if this process dies, the lease runs out and another
        worker runs it. No job queued (a vote that waits for more): nothing claimed."""
        taken = queued.withdraw(session)
        if taken is None or taken.job_id is None:
            slot.claimed = []
            return
        assert taken.request is not None
        claim = worker.Claim(taken.job_id, taken.request.id, taken.request.run_id,
                             taken.token, 1)
        # the offer holds the request, so the session still has it: only the run is read
        slot.claimed = [(claim, self._load_or_none(session, claim))]
        queued.claimed(session, {claim.request_id})

    def start(self, slots: Sequence[Slot]) -> None:
        """After the commit (the ``Committer``'s hook): start the resumes the slots
        claimed, each in a task of its own; free the slots that claimed none."""
        for slot in slots:
            if slot.done:
                continue
            if not slot.claimed:
                self.release(slot)
                continue
            slot.done = True
            task = asyncio.ensure_future(self._inline_resume(*slot.claimed[0]))
            self._inline.add(task)
            task.add_done_callback(self._inline.discard)

    def release(self, slot: Slot) -> None:
        """Free ``slot`` unless its resume started (the decision is over)."""
        if not slot.done:
            slot.done = True
            self._free()

    def _free(self) -> None:
        self._held -= 1
        if self._short:  # a round or a decision went without: the loop looks again
            self._short = False
            self._wakeups.resume_due()

    async def _inline_resume(self, claim: worker.Claim, loaded: Any) -> None:
        try:
            await self.process(claim, loaded, detach=True)
        except Exception:  # the job stays claimed: its lease runs out, the loop retries
            log.exception("a resume claimed by its decision crashed",
                          extra={"run_id": claim.run_id})
        finally:
            self._free()

    async def drain(self, timeout: float) -> None:
        """Wait for the resumes decisions claimed and their after-commit work."""
        if self._inline:
            await asyncio.wait(set(self._inline), timeout=timeout)
        if self._effects:
            await asyncio.wait(set(self._effects), timeout=timeout)

    def _detach(self, work: Coroutine[Any, Any, None]) -> None:
        """Run an outcome's after-commit ``work`` beside the next resume (``due``)."""
        task = asyncio.ensure_future(work)
        self._effects.add(task)
        task.add_done_callback(self._effect_done)

    def _effect_done(self, task: asyncio.Task[None]) -> None:
        self._effects.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._effect_crashes.append(task.exception())  # type: ignore[arg-type]

    async def _effects_done(self) -> BaseException | None:
        """Until the after-commit work of the outcomes stored so far is done; what one
        of them raised (``Outbox.dispatch`` never does, a crash may), as if a job had."""
        if self._effects:
            await asyncio.wait(set(self._effects))
        crashes, self._effect_crashes = self._effect_crashes, []
        return crashes[0] if crashes else None

    def claim_loaded(self, session: Session, limit: int) -> list[tuple[worker.Claim, Any]]:
        """Claim up to ``limit`` jobs and read what each resume needs, in one transaction:
        one statement claims them all, one more reads their requests with their runs."""
        claims = worker.claim_batch(session, self._ctx.now(), self._ctx.tuning.lease,
                                    self._ctx.db.is_postgres, limit, self._ctx.claimant())
        rows: dict[int, tuple[Run, HumanRequest]] = {
            request.id: (run, request) for request, run in session.execute(
                _REQUESTS_WITH_RUNS, {"ids": [claim.request_id for claim in claims]})
        } if claims else {}
        return [(claim, self._load_or_none(session, claim, rows.get(claim.request_id)))
                for claim in claims]

    def _load_or_none(self, session: Session, claim: worker.Claim,
                      read: tuple[Run, HumanRequest] | None = None) -> Any:
        """``_load`` (from ``read`` when it holds the claim's run and request), or None
        when that fails: ``process`` then loads it again on its own and reports it."""
        try:
            run, request = read or (None, None)
            if run is None or request is None or run.id != claim.run_id:
                return self._load(session, claim)
            return run, request, approvals.resume_inputs(session, request)
        except Exception:
            log.warning("reading a claimed resume failed", exc_info=True,
                        extra={"run_id": claim.run_id})
            return None

    def _load(
        self, session: Session, claim: worker.Claim
    ) -> tuple[Run, HumanRequest, Any]:
        run, request = session.get(Run, claim.run_id), session.get(HumanRequest,
                                                                   claim.request_id)
        assert run is not None and request is not None
        return run, request, approvals.resume_inputs(session, request)

    async def process(self, claim: worker.Claim, loaded: Any = None, *,
                      detach: bool = False) -> None:
        """Resume one run with its request's result; success commits with the job's end.

        ``loaded`` is what ``_load`` read in the claim's transaction (None: read
        it now). With ``detach`` it returns once the outcome is committed, and what the
        commit queued is tried in a task ``due`` waits for (``_detach``)."""
        if loaded is None:
            loaded = await self._committer.read(partial(self._load, claim=claim))
        run, request, (results, tickets) = loaded
        for settler in self._settlers:  # no runtime behind it (``ExternalRequests``)
            if await settler.settle(claim, run, request):
                return
        extra = {"run_id": run.id, "ref": request.ref, "attempt": claim.attempts}
        if claim.attempts > self._ctx.tuning.max_attempts:
            await self._jobs.give_up(claim, run.id, "the resume kept crashing the worker")
            return
        if claim.attempts == 1:  # answer -> resume started, once per decision
            metrics.observe_resume(request.decided_at, self._ctx.now())
        span = tracing.start("askhuman.run.resumed", run.trace_context or request.trace_context,
                             {"askhuman.run.id": run.id, "askhuman.agent": run.agent,
                              "askhuman.request.ref": request.ref,
                              "askhuman.resume.attempt": claim.attempts})
        try:
            failed = await self._resume(claim, run, request, results, tickets, span, extra,
                                        detach)
        except BaseException as exc:
            tracing.finish(span, exc)
            raise
        tracing.finish(span, failed)

    async def _resume(self, claim: worker.Claim, run: Run, request: HumanRequest,
                      results: Any, tickets: Any, span: tracing.Span | None,
                      extra: dict[str, Any], detach: bool = False
                      ) -> BaseException | str | None:
        """Run the agent's next leg and store its outcome (``process``'s second half);
        returns what went wrong, for the span (None: resumed and stored)."""
        try:
            result = AskHumanToolResult.model_validate(request.result)
            runtime = await self._runtimes.ready(run.agent)
            async with Heartbeat(self._ctx.db, self._ctx.now, ResumeJob, claim.job_id,
                                 claim.token, self._ctx.tuning.lease,
                                 self._ctx.tuning.heartbeat_seconds) as beat:
                with tracing.current(span):  # an instrumented agent's spans nest under it
                    outcome = await beat.guard(runtime.resume(
                        dict(run.snapshot or {}), results,
                        **approvals.resume_kwargs(self._ctx, self._committer, run.agent,
                                                  run.id, tickets)))
        except worker.LeaseLost:
            log.warning("lease lost during the resume; another worker owns it", extra=extra)
            return "lease lost"
        except ToolBindingError as exc:  # not the approved call: nothing runs, no retry
            log.warning("resume refused: tool call differs", extra={**extra, "error": str(exc)})
            await self._jobs.refuse_binding(claim, run.id, exc)
            return exc
        except Exception as exc:
            log.warning("resume failed", extra={**extra, "error": str(exc)})
            metrics.resume_failed(run.agent)
            await self._jobs.retry_or_fail(claim, run.id, str(exc) or type(exc).__name__)
            return exc
        if span is not None:
            span.set_attribute("askhuman.run.outcome", outcome.kind)

        def commit(session: Session) -> None:
            worker.complete(session, claim, self._ctx.now())
            audits: list[dict[str, Any]] = []  # this resume's rows, in one statement
            self._outcomes.apply(session, run.id, outcome, known=run, audits=audits)
            store.audit(session, self._ctx.now(), "resumed", run_id=run.id, ref=request.ref,
                        details={"attempt": claim.attempts, "status": result.status},
                        into=audits)
            store.insert_audits(session, audits)

        try:  # group-committed; then delivers the follow-up request / posts the output
            await self._committer.grouped(commit, effects=self._detach if detach else None)
        except worker.LeaseLost:
            log.warning("lease lost; another worker owns the resume", extra=extra)
            return "lease lost"
        except Exception as exc:
            log.exception("storing the resume outcome failed", extra=extra)
            await self._jobs.retry_or_fail(claim, run.id, str(exc) or type(exc).__name__)
            return exc
        log.info("run resumed", extra=extra)
        return None

