"""``Engine``: the composition root of the approval lifecycle, and its public facade.

The engine is a set of small services, each built here once with the services it
needs named in its constructor (see ``docs/architecture.md`` for the map). ``Engine``
wires them and lends their public methods to the platforms, the door (API, MCP) and
the CLI under the names those callers have always used; it also runs the worker loops
(``serve_forever``) that drive the sweeps, the outbox and the resume queue.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable

from bot.engine import heap, home_signals, sqlite_watch, waiters
from bot.engine.access import Authorizer
from bot.engine.attachments import Attachments
from bot.engine.batch import Batches
from bot.engine.card_messages import CardMessages
from bot.engine.click_check import ClickCheck
from bot.engine.clicks import ClickInbox
from bot.engine.committer import Committed, Committer, log
from bot.engine.context import Clock, EngineContext, Tuning, utc_now
from bot.engine.decisions import Decider
from bot.engine.delegation_chat import Delegations
from bot.engine.delivery import DeliveryHandlers
from bot.engine.dispatch import Outbox
from bot.engine.external import ExternalRequests
from bot.engine.grants import Grants
from bot.engine.home_signals import HomeSignals
from bot.engine.instances import Instances
from bot.engine.pending import Pending
from bot.engine.platforms import Platforms
from bot.engine.queries import Queries
from bot.engine.rate_limits import RateLimits
from bot.engine.request_cards import Cards
from bot.engine.resolver import Resolver
from bot.engine.results import RespondResult, UnknownAgentError
from bot.engine.resumes import ResumeJobs, ResumeWorker
from bot.engine.run_starts import StartInbox
from bot.engine.runs import OutcomeRecorder, RunStarter
from bot.engine.runtimes import RuntimeFactory, Runtimes, registry_runtimes
from bot.engine.starters import Starters
from bot.engine.sweeps import Reminders
from bot.engine.targets import targets_for
from bot.engine.triggers import Triggers
from bot.engine.upkeep import Housekeeping
from bot.engine.wakeups import Background, Wakeups
from bot.engine.webhooks import Webhooks, WebhookSender
from bot.engine.withdraw import Withdrawals
from bot.settings import Settings
from storage import Database

OUTBOX_ROUND = 50
"""Side effects the outbox loop claims per round (it loops while rounds are full)."""
OUTBOX_CONCURRENCY = 8
"""Platform calls the outbox loop keeps in flight at once."""
RESUME_ROUND = 200
"""Resume jobs one round of the resume loop claims at most (it loops while rounds are full)."""

__all__ = [
    "Clock",
    "Engine",
    "RespondResult",
    "RuntimeFactory",
    "UnknownAgentError",
    "registry_runtimes",
    "targets_for",
    "utc_now",
]


def _tuning(*, max_attempts: int, backoff_base: float, backoff_cap: float,
            lease_seconds: float, outbox_max_attempts: int, outbox_lease_seconds: float,
            heartbeat_seconds: float | None, seen_retention_seconds: float,
            outbox_retention_seconds: float, housekeeping_interval_seconds: float) -> Tuning:
    return Tuning(
        max_attempts=max_attempts, backoff_base=backoff_base, backoff_cap=backoff_cap,
        lease=dt.timedelta(seconds=lease_seconds), outbox_max_attempts=outbox_max_attempts,
        outbox_lease=dt.timedelta(seconds=outbox_lease_seconds),
        heartbeat_seconds=heartbeat_seconds or min(lease_seconds, outbox_lease_seconds) / 3,
        seen_retention=dt.timedelta(seconds=seen_retention_seconds),
        outbox_retention=dt.timedelta(seconds=outbox_retention_seconds),
        housekeeping_interval=dt.timedelta(seconds=housekeeping_interval_seconds))


class Engine:
    """Platform-agnostic approval lifecycle. All methods are safe to call concurrently."""

    def __init__(
        self,
        database: Database,
        settings: Settings,
        runtimes: RuntimeFactory | None = None,
        clock: Clock | None = None,
        *,
        max_attempts: int = 5,
        backoff_base: float = 2.0,
        backoff_cap: float = 300.0,
        lease_seconds: float = 15.0,
        outbox_max_attempts: int = 8,
        outbox_lease_seconds: float = 15.0,
        heartbeat_seconds: float | None = None,
        seen_retention_seconds: float = 86400.0,
        outbox_retention_seconds: float = 7 * 86400.0,
        housekeeping_interval_seconds: float = 600.0,
    ) -> None:
        tuning = _tuning(
            max_attempts=max_attempts, backoff_base=backoff_base, backoff_cap=backoff_cap,
            lease_seconds=lease_seconds, outbox_max_attempts=outbox_max_attempts,
            outbox_lease_seconds=outbox_lease_seconds, heartbeat_seconds=heartbeat_seconds,
            seen_retention_seconds=seen_retention_seconds,
            outbox_retention_seconds=outbox_retention_seconds,
            housekeeping_interval_seconds=housekeeping_interval_seconds)
        self.ctx = ctx = EngineContext(database, settings, clock or utc_now, tuning)
        self.db = database
        self.waiters = waiters.Waiters()
        """Callers waiting for a request's outcome (``bot.engine.waiters``)."""
        self._build(ctx, runtimes)
        self._lend()

    def _build(self, ctx: EngineContext, runtimes: RuntimeFactory | None) -> None:
        """Every service, once, each given what it calls (no service reaches another
        through this object)."""
        self.wakeups = Wakeups()
        self.background = Background()
        self.platforms = Platforms()
        self.committer = Committer(ctx.db, self.waiters)
        self.runtimes = Runtimes(runtimes or registry_runtimes(ctx.settings),
                                 from_registry=runtimes is None)
        self.cards = Cards(ctx, self.committer)
        self.resolver = Resolver(ctx, self.committer, self.cards)
        self.authorizer = Authorizer(ctx, self.committer, self.cards, self.platforms)
        self.starters = Starters(ctx, self.committer, self.platforms)
        self.pending = Pending(ctx, self.committer, self.authorizer)
        self.outcomes = OutcomeRecorder(ctx)
        self.jobs = ResumeJobs(ctx, self.committer, self.outcomes)
        self.resumes = ResumeWorker(ctx, self.committer, self.runtimes, self.outcomes,
                                    self.jobs, self.wakeups)
        self.decider = Decider(ctx, self.committer, self.authorizer, self.cards,
                               self.resolver, self.resumes)
        self.attachments = Attachments(ctx, self.committer, self.authorizer)
        self.withdrawals = Withdrawals(ctx, self.committer, self.cards, self.authorizer,
                                       self.resolver)
        messages = CardMessages()
        self.clicks = ClickInbox(ctx, self.committer, self.decider, self.attachments,
                                 self.withdrawals, self.authorizer, self.platforms,
                                 self.background, messages)
        self.batches = Batches(ctx, self.committer, self.clicks)
        self.click_check = ClickCheck(ctx, self.committer, self.authorizer, self.cards,
                                      self.platforms, messages)
        self.webhooks = Webhooks(ctx, self.committer)
        self.deliveries = deliveries = DeliveryHandlers(ctx, self.committer, self.cards,
                                                        self.platforms)
        self.outbox = Outbox(ctx, self.committer, self.resolver, self.background,
                             {**deliveries.handlers(), "webhook": self.webhooks.handler()})
        self.committer.on_commit(self._after_commit)
        self.starter = RunStarter(ctx, self.committer, self.starters, self.runtimes,
                                  self.outcomes)
        self.start_inbox = StartInbox(ctx, self.committer, self.starters, self.runtimes,
                                      self.outcomes, self.platforms, self.background)
        self.external = ExternalRequests(ctx, self.committer, self.decider, self.resolver,
                                         self.jobs, self.waiters)
        self.resumes.add_settler(self.external)
        self.triggers = Triggers(ctx, self.committer, self.starter, self.background)
        self.reminders = Reminders(ctx, self.committer)
        self.housekeeping = Housekeeping(ctx, self.committer)
        self.instances = Instances(ctx, self.wakeups)
        self.queries = Queries(self.committer, self.cards, ctx.now)
        self.delegations = Delegations(ctx, self.committer)
        self.rate_limits = RateLimits(self.committer, ctx.db.is_postgres)
        self.home_signals = HomeSignals(ctx.db)
        self.grants = Grants(ctx, self.committer, self.authorizer)
        self.waiters.on_channel(home_signals.CHANNEL, self.home_signals.heard)

    def _lend(self) -> None:
        """The public API, under the names platforms, the door and the CLI call."""
        self.register_adapter = self.platforms.register
        self.directory = self.platforms.directory
        # runs
        self.start_run = self.starter.start
        self.start_refusal = self.starters.refusal
        self.record_start = self.start_inbox.record_start
        self.run_start = self.start_inbox.run_start
        self.abandon_start = self.start_inbox.abandon_start
        self.recover_starts = self.start_inbox.recover_starts
        self.startable_agents = self.starters.startable
        self.close_runtimes = self.runtimes.close
        # answers and clicks
        self.respond = self.decider.respond
        self.cancel = self.decider.cancel
        self.cancel_as_operator = self.decider.cancel_as_operator
        self.expire_due = self.decider.expire_due
        self.attach_files = self.attachments.attach_files
        self.withdraw = self.withdrawals.withdraw
        self.answer_refusal = self.authorizer.answer_refusal
        self.record_click = self.clicks.record_click
        self.decide_click = self.clicks.decide_click
        self.abandon_click = self.clicks.abandon_click
        self.check_click = self.click_check.check
        self.told_clicker = self.clicks.told
        self.tell_failed = self.clicks.tell_failed
        self.recover_clicks = self.clicks.recover_clicks
        self.record_batch = self.batches.record
        self.decide_batch = self.batches.decide
        # what people see
        self.card = self.cards.card
        self.pending_page = self.pending.page
        self.pending_for = self.pending.all_for
        self.find_by_message = self.queries.find_by_message
        self.card_for_message = self.queries.card_for_message
        self.runs_started_by = self.queries.runs_started_by
        self.job_states = self.queries.job_states
        self.outbox_states = self.queries.outbox_states
        # sweeps and housekeeping
        self.remind_and_escalate_due = self.reminders.remind_and_escalate_due
        self.first_seen = self.housekeeping.first_seen
        self.first_seen_chain = self.housekeeping.first_seen_chain
        self.audit_refusal = self.housekeeping.audit_refusal
        self.prune_old = self.housekeeping.prune_old
        self.seal_audit = self.housekeeping.seal_audit
        # the door: API / MCP requests, webhooks, triggered runs
        self.api_client_by_key_hash = self.external.client_by_key_hash
        self.take_rate_token = self.rate_limits.take
        self.create_external = self.external.create
        self.external_view = self.external.view
        self.wait_external = self.external.wait
        self.list_external = self.external.list
        self.cancel_external = self.external.cancel
        self.answer_external = self.external.answer
        self.start_triggered_run = self.triggers.start_run
        self.run_view = self.triggers.run_view
        self.fire_due_schedules = self.triggers.fire_due_schedules
        self.reclaim_triggers = self.triggers.reclaim_triggers
        self.schedule_forever = self.triggers.schedule_forever
        # standing grants
        self.active_grants = self.grants.active_grants
        self.grant = self.grants.grant
        self.grants_listed = self.grants.listed
        self.revoke_grant = self.grants.revoke_grant
        self.revoke_grant_as_operator = self.grants.revoke_grant_as_operator
        self.expire_grants = self.grants.expire_due

    async def _after_commit(self, done: Committed) -> None:
        """What a commit left to do: wake the loops it queued work for, then try the
        side effects it claimed (the ``Committer``'s ``on_commit`` hook). The loops are
        woken first: a decision's resume does not wait for its card update's platform
        call and bookkeeping commit (they are independent rows, each exactly once)."""
        if done.slots:  # resumes claimed in this transaction start before anything else
            self.resumes.start(done.slots)
        if done.resumes_queued:
            self.wakeups.resume_due()
        if done.outbox_queued:
            self.wakeups.outbox_due()
        if done.claims:
            await self.outbox.after_commit(done.claims)

    # ------------------------------------------------------------------ configuration

    @property
    def settings(self) -> Settings:
        """The admin configuration every service reads now."""
        return self.ctx.settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        self.apply_settings(settings)

    @property
    def tuning(self) -> Tuning:
        """Retry, lease and retention knobs, shared by every service (tests turn them)."""
        return self.ctx.tuning

    def apply_settings(self, settings: Settings) -> None:
        """Swap in a reloaded config (``bot.reload``): one assignment, so readers see
        the old or the new one. Agents added by it are built on first use; runtimes
        already built keep their definition until a restart."""
        self.runtimes.apply_settings(settings)
        self.ctx.settings = settings

    def register_webhook_sender(self, sender: WebhookSender) -> None:
        """Attach the door's webhook sender (``bot.api.webhooks``)."""
        self.webhooks.sender = sender

    def now(self) -> dt.datetime:
        """Naive UTC 'now' as stored in the database."""
        return self.ctx.now()

    async def drain(self, timeout: float = 10.0) -> None:
        """Wait for post-commit side effects and batched writes still in flight
        (shutdown, tests): after a normal shutdown nothing queued is lost."""
        await self.background.drain(timeout)
        await self.resumes.drain(timeout)
        await self.committer.drain(timeout)

    # ------------------------------------------------------------------ worker loop

    async def run_worker_once(self, limit: int = 50) -> int:
        """Process due resume jobs until none is left (or ``limit``); returns how many ran.

        First it retries due outbox side effects (up to ``limit``; not counted in the
        return value), so a delivery that gave up resolves ``unavailable`` and its resume
        runs in the same sweep, then decides stored clicks left behind (``recover_clicks``)
        and runs stored starts left behind (``recover_starts``).
        """
        await self.outbox.sweep(limit)
        await self.housekeeping.maybe_prune()
        await self.recover_clicks(limit)
        await self.recover_starts()
        return await self.resumes.due(limit)

    async def serve_forever(self, stop: asyncio.Event, poll_interval: float = 2.0, *,
                            loops: bool = True) -> None:
        """Run the worker loops until ``stop`` is set: timeouts, reminders, the outbox,
        stored clicks, stored run starts and resumes, each in its own loop so none waits
        behind another (a resume stuck behind a slow model call never delays a timeout).
        Decisions wake the resume loop early. The first call in a process freezes its
        startup heap (``heap``). Without ``loops`` (``serve --no-background``: an
        ``askhuman worker`` runs them) only the heartbeat below runs.

        While it runs, this process beats its ``instances`` row, so rows it holds are
        never taken from it, and a dead holder's are taken over within seconds. The
        heartbeat outlives the loops until the work they started is drained, then the
        instance signs off (its leftovers are free for the others at once)."""
        heap.freeze_startup_heap()
        self.wakeups.fresh_events()
        signed_off = asyncio.Event()
        heartbeat = asyncio.create_task(self.instances.beat_forever(signed_off),
                                        name="instance-heartbeat")
        try:
            if loops:
                await self._run_loops(stop, poll_interval)
            else:
                await stop.wait()
            await self.drain(timeout=5)  # post-commit tries the loops started
        finally:
            signed_off.set()
            await heartbeat

    async def _run_loops(self, stop: asyncio.Event, poll_interval: float) -> None:
        loops: list[tuple[str, Callable[[], Awaitable[object]], asyncio.Event | None]] = [
            ("timeouts", self.expire_due, None),
            ("grants", self.expire_grants, None),
            ("reminders", self.remind_and_escalate_due, None),
            ("outbox", self.outbox_round, self.wakeups.outbox),
            ("clicks", self.recover_clicks, self.wakeups.clicks),
            ("starts", self.recover_starts, self.wakeups.starts),
            ("resumes", self.resume_round, self.wakeups.resume),
            ("audit_seal", self.seal_audit, None),
        ]
        schedules = {"timeouts": self.decider.next_expiry_in}  # wake at the next deadline
        tasks = [self._loop(name, step, stop, poll_interval, wake, schedules.get(name))
                 for name, step, wake in loops]
        tasks.append(self.hear_others(stop))  # their decisions wake our resume loop
        unsubscribe = self.waiters.subscribe(self.wakeups.resume_due)
        self.resumes.with_decisions(True)  # a decision with a free slot claims its resume
        try:
            await asyncio.gather(*tasks)
        finally:
            self.resumes.with_decisions(False)
            unsubscribe()

    async def hear_others(self, stop: asyncio.Event) -> None:
        """Until ``stop``, hear what other processes on this database decide and wake
        this one's resume loop and long-polls: PostgreSQL's ``NOTIFY``
        (``waiters.listen_forever``), or a SQLite file's data version when processes
        share it (``Tuning.watch_interval``, ``sqlite_watch``)."""
        interval, path = self.tuning.watch_interval, self.db.sqlite_file
        if self.db.is_postgres:
            await waiters.listen_forever(self.settings.database_url, self.waiters, stop)
        elif interval is not None and path is not None:
            resumable = self.queries.resume_due if self.tuning.watch_resumes else None
            await sqlite_watch.watch_forever(path, self.waiters, self.queries.not_open,
                                             resumable, stop, interval)
        else:
            await stop.wait()

    async def outbox_round(self) -> None:
        while await self.outbox.sweep_concurrently(OUTBOX_ROUND, OUTBOX_CONCURRENCY):
            pass  # a full round: more may be due (e.g. 10,000 timed-out cards)
        await self.housekeeping.maybe_prune()

    async def resume_round(self) -> int:
        """Resume until the queue is empty: a full round (``RESUME_ROUND``) means more
        may be due, and the decisions that queued them may all have poked already."""
        done = 0
        while True:
            ran = await self.resumes.due(RESUME_ROUND,
                                         self.settings.worker.resume_concurrency)
            done += ran
            if ran < RESUME_ROUND:
                return done

    @staticmethod
    async def _loop(
        name: str, step: Callable[[], Awaitable[object]], stop: asyncio.Event,
        poll_interval: float, wake: asyncio.Event | None,
        next_in: Callable[[], Awaitable[float | None]] | None = None,
    ) -> None:
        """Run ``step`` every ``poll_interval`` seconds (or when ``wake`` is set) until
        ``stop``; a failing round is logged and retried at the next interval. With
        ``next_in`` (seconds until the step has work next, None: not known), the step
        runs again then, when that is sooner than the poll interval."""
        while not stop.is_set():
            if wake is not None:
                wake.clear()
            pause = poll_interval
            try:
                await step()
                after = await next_in() if next_in is not None else None
                if after is not None:
                    pause = min(poll_interval, after)
            except Exception:
                log.exception("worker loop failed; retrying after the poll interval",
                              extra={"loop": name})
            waiting = {asyncio.ensure_future(stop.wait())}
            if wake is not None:
                waiting.add(asyncio.ensure_future(wake.wait()))
            await asyncio.wait(waiting, timeout=pause, return_when=asyncio.FIRST_COMPLETED)
            for task in waiting:
                task.cancel()
