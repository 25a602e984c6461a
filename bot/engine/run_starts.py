"""Run starts: stored before the platform is told "started", then run from the stored row.

Slack never resends an acknowledged slash command or event, and Feishu never re-pushes
a message it got its 200 for, so an adapter checks the starter (``Starters.refusal``:
a refusal is answered at once and nothing is stored), calls ``record_start`` (one
group-committed insert, bounded by a time budget), acks only once it returns a
``StoredStart``, then calls ``run_start``. If the database cannot take the start within
the budget, ``record_start`` returns None and guarantees nothing will run from it: the
adapter says so instead of "started". Starts left behind (a crash right after the ack,
an error while storing the outcome) are claimed by ``recover_starts`` in the worker and
run; a start that cannot start (agent removed, starter no longer allowed, no thread to
report into, too many attempts) is audited and its starter told where they asked.

Exactly once: the row is held (lease + ``Heartbeat``) while the first leg runs, the
``runs`` row is created idempotently with the run id chosen up front, and the row is
closed in the transaction that stores the first leg's outcome (fenced on its claim
token, like resumes). See ``bot.engine.start_rows`` for the rows.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import uuid
from dataclasses import dataclass
from functools import partial

from sqlalchemy.orm import Session

from bot.agents.base import AgentRuntimeError, Outcome
from bot.engine import approvals, outbox, start_rows, store, worker
from bot.engine.committer import Committer, log
from bot.engine.context import EngineContext
from bot.engine.health import database_unreachable
from bot.engine.leases import Heartbeat, LeaseLost
from bot.engine.platforms import Platforms
from bot.engine.ports import DeliveryError, Origin, PostKey, delivery_reason
from bot.engine.results import EngineError
from bot.engine.runs import OutcomeRecorder, insert_run
from bot.engine.runtimes import Runtimes
from bot.engine.start_rows import Start, StartTakenOver, StoredStart
from bot.engine.starters import Starters
from bot.engine.wakeups import Background
from renderers.words import Said, said, verbatim
from storage import Run, RunStart

RECORD_BUDGET = 2.0
"""Seconds an adapter may spend storing a start before it must ack (Slack allows 3, and
the starter check comes first)."""
RECORD_MARGIN = 0.3
"""The insert is skipped if its transaction only starts this close to the budget's end,
so a start the caller gave up on is (almost) never stored; see ``_orphan``."""
RECOVER_ROUND = 8
"""Left-over starts one round of the worker claims (each runs a first leg at once)."""


@dataclass(frozen=True)
class Started:
    """What ``run_start`` did: the run's id once it started (its first leg's outcome is
    stored, or it is left to the worker), or the words telling the starter why not."""

    run_id: str | None
    words: Said | None = None


class StartInbox:
    """The run-start inbox: record before the ack, run exactly once, recover after a crash."""

    def __init__(self, ctx: EngineContext, committer: Committer, starters: Starters,
                 runtimes: Runtimes, outcomes: OutcomeRecorder, platforms: Platforms,
                 background: Background) -> None:
        self._ctx = ctx
        self._committer = committer
        self._starters = starters
        self._runtimes = runtimes
        self._outcomes = outcomes
        self._platforms = platforms
        self._background = background

    # ------------------------------------------------------------------ before the ack

    async def record_start(self, start: Start, budget: float = RECORD_BUDGET
                           ) -> StoredStart | None:
        """Store ``start`` durably within ``budget`` seconds; None if that was not possible.

        None means nothing was (or will be) started from it: tell the starter to try
        again. The database error itself is raised when the database cannot be reached
        (``health.database_unreachable``), so the adapter can say that instead. The row is
        born claimed by the caller, who then calls ``run_start``.
        """
        token, now = uuid.uuid4().hex, self._ctx.now()
        cutoff = time.monotonic() + max(0.0, budget - RECORD_MARGIN)

        def insert(session: Session) -> int | None:
            if time.monotonic() > cutoff:  # the caller has (nearly) given up: store nothing
                return None
            row = start_rows.new_row(start, now, self._ctx.start_hold(), token)
            session.add(row)
            session.flush()
            return row.id

        task = asyncio.ensure_future(self._committer.batched(insert))
        extra = {"agent": start.agent[:64], "platform": start.origin.platform,
                 "user": start.started_by.user_id, "run_id": start.run_id}
        try:
            async with asyncio.timeout(max(budget, 0.0)):
                row_id = await asyncio.shield(task)
        except TimeoutError:
            task.add_done_callback(partial(self._orphan, start, token, now))
            log.warning("run start not recorded within its budget; the starter is told to "
                        "retry", extra={**extra, "budget_seconds": budget})
            return None
        except Exception as exc:
            log.exception("recording a run start failed; the starter is told to retry",
                          extra=extra)
            if database_unreachable(exc):
                raise  # the adapter says "I can't reach my database", not "busy"
            return None
        if row_id is None:
            log.warning("database too busy to record a run start in time; the starter is "
                        "told to retry", extra=extra)
            return None
        return StoredStart(start, row_id, token, now)

    def _orphan(self, start: Start, token: str, now: dt.datetime,
                task: asyncio.Future[int | None]) -> None:
        """A start stored after its caller gave up (and told the starter it was not
        recorded): close it unused, so nothing runs from it."""
        if task.cancelled() or task.exception() is not None or task.result() is None:
            return
        stored = StoredStart(start, int(task.result() or 0), token, now)
        self._background.start(self.abandon_start(stored))

    async def abandon_start(self, stored: StoredStart) -> None:
        """The starter was already told this start did not happen: close the row unused."""
        try:
            await self._committer.tx(lambda s: start_rows.finish(
                s, stored, self._ctx.now(), "abandoned", state="failed"))
        except StartTakenOver:
            log.warning("an abandoned run start was taken over by a worker",
                        extra={"run_id": stored.start.run_id})

    # ------------------------------------------------------------------ after the ack

    async def run_start(self, stored: StoredStart, *, tell: bool = False) -> Started:
        """Run a stored start's first leg and store its outcome with the row's end; never
        raises. Held under a heartbeat the whole time, so only a dead holder loses it.

        ``tell``: the starter is told through the origin (a post in their thread or
        chat) why it could not start; otherwise (an adapter answering them now) the
        words come back in ``Started.words`` for the caller to show.
        """
        tuning = self._ctx.tuning
        extra = {"run_id": stored.start.run_id, "agent": stored.start.agent[:64],
                 "attempt": stored.attempts}
        try:
            async with Heartbeat(self._ctx.db, self._ctx.now, RunStart, stored.id,
                                 stored.token, tuning.lease, tuning.heartbeat_seconds) as beat:
                return await beat.guard(self._run(stored, tell))
        except (LeaseLost, StartTakenOver):
            log.warning("run start taken over by another worker; it runs it", extra=extra)
        except Exception as exc:
            log.exception("running a stored start failed; the worker retries it", extra=extra)
            await self._retry(stored, exc)
        return Started(stored.start.run_id)

    async def _run(self, stored: StoredStart, tell: bool) -> Started:
        start = stored.start
        if stored.attempts > self._ctx.tuning.max_attempts:
            return await self._cannot_start(stored, "gave_up", said(
                "start.gave_up", agent=start.agent[:64]), tell)
        refusal = await self._starters.refusal(start.agent, start.started_by)  # audited
        if refusal is not None:
            return await self._cannot_start(stored, "refused", refusal, tell)
        try:
            runtime = self._runtimes.get(start.agent)
        except (EngineError, AgentRuntimeError) as exc:
            words = exc.words if isinstance(exc, EngineError) else verbatim(str(exc))
            return await self._cannot_start(stored, "unavailable", said(
                "start.not_started", agent=start.agent[:64], reason=words), tell)
        origin = await self._origin(stored)
        if isinstance(origin, Said):
            return await self._cannot_start(stored, "unavailable", origin, tell)
        now = self._ctx.now()
        await self._committer.tx(lambda s: self._begin(s, stored, now, origin))
        log.info("run started", extra={"run_id": start.run_id, "agent": start.agent})
        try:
            outcome = await runtime.run(start.prompt, **approvals.run_kwargs(
                self._ctx, self._committer, start.agent, start.run_id))
        except Exception as exc:  # the agent failed: that is the first leg's outcome
            log.exception("run failed", extra={"run_id": start.run_id})
            await self._committer.tx(partial(self._failed, stored=stored,
                                             error=str(exc) or type(exc).__name__))
            return Started(start.run_id)
        await self._committer.grouped(partial(self._succeeded, stored=stored, outcome=outcome))
        return Started(start.run_id)

    async def _origin(self, stored: StoredStart) -> Origin | Said:
        """Where the run reports: the stored origin, the thread an earlier try opened
        (its ``runs`` row), or a thread the adapter opens now (``OpensThreads``)."""
        start = stored.start
        run = await self._committer.read(lambda s: s.get(Run, start.run_id))
        if run is not None:
            return Origin(run.origin_platform, run.origin_channel, run.origin_thread)
        opener = self._platforms.thread_opener(start.origin.platform)
        if start.origin.thread is not None or opener is None:
            return start.origin
        key = PostKey(f"start:{start.run_id}", start.run_id, stored.attempts,
                      since=stored.created_at.replace(tzinfo=dt.UTC))
        try:
            return await opener.open_thread(start.origin, start.started_by, start.agent,
                                            start.prompt, key)
        except DeliveryError as exc:
            return said("start.no_thread", reason=delivery_reason(exc))

    def _begin(self, session: Session, stored: StoredStart, now: dt.datetime,
               origin: Origin) -> None:
        """Still ours? Then the ``runs`` row (once, with the chosen id) and the thread."""
        start = stored.start
        start_rows.hold(session, stored, now, self._ctx.tuning.lease, origin.thread)
        insert_run(session, now, start.run_id, start.agent, start.prompt, start.started_by,
                   origin)

    def _succeeded(self, session: Session, stored: StoredStart, outcome: Outcome) -> None:
        start_rows.finish(session, stored, self._ctx.now(), "started")
        self._outcomes.apply(session, stored.start.run_id, outcome)

    def _failed(self, session: Session, stored: StoredStart, error: str) -> None:
        now = self._ctx.now()
        start_rows.finish(session, stored, now, "failed", error=error)
        self._outcomes.fail(session, stored.start.run_id, error, now)
        store.audit(session, now, "run_failed", outcome="error", run_id=stored.start.run_id,
                    reason=error)

    async def _cannot_start(self, stored: StoredStart, why: str, words: Said,
                            tell: bool) -> Started:
        """Close the row ``failed``, audited (``run_start_failed``); a run an earlier try
        made is failed too (its thread is told), else the starter is told at the origin
        when ``tell``."""
        start = stored.start

        def close(session: Session) -> bool:
            now = self._ctx.now()
            start_rows.finish(session, stored, now, why, state="failed", error=str(words))
            store.audit(session, now, "run_start_failed", outcome="refused"
                        if why == "refused" else "error", actor=start.started_by,
                        reason=str(words)[:2000], details={
                            "agent": start.agent[:64], "run_id": start.run_id, "check": why,
                            "attempts": stored.attempts})
            if session.get(Run, start.run_id) is not None:
                self._outcomes.fail(session, start.run_id, str(words), now)
                return False
            if tell:
                self._tell(session, now, start, words)
            return tell

        told = await self._committer.tx(close)
        log.info("run start could not start", extra={
            "run_id": start.run_id, "agent": start.agent[:64], "why": why})
        return Started(None, None if told else words)

    def _tell(self, session: Session, now: dt.datetime, start: Start, words: Said) -> None:
        """Queue telling the starter, where they asked, in the agent's route's language."""
        agent = self._ctx.settings.agents.get(start.agent)
        route = self._ctx.settings.routes.get(agent.route) if agent is not None else None
        locale = getattr(route, "locale", None)
        origin = start.origin
        outbox.enqueue(session, now, self._ctx.outbox_hold(), "post_run_result",
                       platform=origin.platform, payload={
                           "text": words.text(locale), "channel": origin.channel,
                           "thread": origin.thread})

    async def _retry(self, stored: StoredStart, exc: BaseException) -> None:
        """Give the row back for a retry with backoff (if that fails too, its lease runs
        out and a worker takes it anyway)."""
        tuning = self._ctx.tuning
        delay = worker.backoff(stored.attempts, tuning.backoff_base, tuning.backoff_cap)
        try:
            await self._committer.tx(lambda s: start_rows.release(
                s, stored, self._ctx.now(), delay, str(exc) or type(exc).__name__))
        except Exception:
            log.exception("could not release a run start; its lease will run out",
                          extra={"run_id": stored.start.run_id})

    # ------------------------------------------------------------------ the worker

    async def recover_starts(self, limit: int = RECOVER_ROUND) -> int:
        """Run stored starts nobody finished (their holder died, or storing the outcome
        failed), telling each starter where they asked if it cannot start; returns how
        many were claimed. Claimed ones run side by side, each under its own heartbeat."""
        claimed: list[StoredStart] = []
        while len(claimed) < limit:
            one = await self._committer.tx(lambda s: start_rows.claim_next(
                s, self._ctx.now(), self._ctx.tuning.lease, self._ctx.db.is_postgres,
                self._ctx.claimant()))
            if one is None:
                break
            log.info("recovering a stored run start", extra={
                "run_id": one.start.run_id, "attempt": one.attempts})
            claimed.append(one)
        if claimed:
            await asyncio.gather(*(self.run_start(one, tell=True) for one in claimed))
        return len(claimed)
