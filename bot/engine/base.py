"""The state every part of the engine shares, and the one way to touch the database.

``EngineBase`` holds the configuration, the registered platforms and the agent
runtimes, and offers the three ways to touch the database: ``_tx`` runs a function
in one write transaction, then tries the side effects it queued in the outbox;
``_read`` runs a lookup on a snapshot without the write lock; ``_batched`` runs a
small write (an audit row, a dedupe key, an outbox completion, a resume claim) in a
transaction shared with the other writes queued meanwhile (group commit), so a burst
costs a few commits instead of one each; ``_grouped`` is ``_tx`` through that same
group commit (decisions, resume outcomes), its side effects tried after the commit.
The mixins in ``runs``, ``access``, ``decisions``, ``delivery``, ``dispatch`` and
``sweeps`` build on it, and ``core.Engine`` puts them together.
"""

from __future__ import annotations

import abc
import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from sqlalchemy.orm import Session

from bot.agents.base import AgentRuntime
from bot.askhuman.schema import AskHumanToolResult
from bot.engine import outbox, policy, store, waiters
from bot.engine.cards import build_card, localized, to_db_time
from bot.engine.leases import Heartbeat, Leased
from bot.engine.outbox import OutboxClaim
from bot.engine.ports import DeliveryTarget, Directory, Identity, PlatformAdapter
from bot.engine.results import RespondResult
from bot.settings import RouteSettings, Settings
from renderers.card import RequestCard
from storage import Database, HumanRequest, Run

log = logging.getLogger("askhuman.engine")

T = TypeVar("T")
BATCH_LINGER_SECONDS = 1.0
"""How long the group-commit thread waits for more work before it ends."""
RuntimeFactory = Callable[[str], AgentRuntime]
"""Build (or look up) the runtime for a configured agent name."""
Clock = Callable[[], dt.datetime]
Loaded = tuple[HumanRequest, Run, RequestCard]
"""A request, its run, and its card as people should see it now."""


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def registry_runtimes(settings: Settings) -> RuntimeFactory:
    """The default factory: ``bot.agents.build_runtime`` on each configured agent."""

    def build(name: str) -> AgentRuntime:
        from bot.agents import AgentSpec, build_runtime

        agent = settings.agents[name]
        spec = AgentSpec(
            name=name,
            model=agent.model,
            instructions=agent.instructions,
            ask_human=agent.ask_human,
            tools=tuple(agent.tools),
        )
        runtime: AgentRuntime = build_runtime(spec)
        return runtime

    return build


def targets_for(route: RouteSettings, platform: str) -> list[DeliveryTarget]:
    """The recipients admin configuration lists for one platform of a route."""
    if platform == "slack" and route.slack is not None:
        channels = [route.slack.channel] if route.slack.channel else []
        users = route.slack.users
    elif platform == "feishu" and route.feishu is not None:
        channels = [route.feishu.chat_id] if route.feishu.chat_id else []
        users = route.feishu.users
    elif platform == "console":
        return [DeliveryTarget("channel", "console")]
    else:
        return []
    return [DeliveryTarget("channel", c) for c in channels] + [
        DeliveryTarget("user", u) for u in users
    ]


class EngineBase(abc.ABC):
    """Shared state and plumbing; see ``bot.engine`` for what the constructor knobs mean.

    Two seams are left to the mixins, so each concern can call the other without
    importing it: ``_dispatch`` (``dispatch``) and ``_resolve_in`` (``decisions``).
    """

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
        lease_seconds: float = 30.0,
        outbox_max_attempts: int = 8,
        outbox_lease_seconds: float = 30.0,
        heartbeat_seconds: float | None = None,
        background_card_updates: bool = False,
        seen_retention_seconds: float = 86400.0,
        outbox_retention_seconds: float = 7 * 86400.0,
        housekeeping_interval_seconds: float = 600.0,
    ) -> None:
        self.db = database
        self.settings = settings
        self._runtime_factory = runtimes or registry_runtimes(settings)
        self._runtimes: dict[str, AgentRuntime] = {}
        self._clock = clock or utc_now
        self._adapters: dict[str, tuple[PlatformAdapter, Directory | None]] = {}
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.lease = dt.timedelta(seconds=lease_seconds)
        self.outbox_max_attempts = outbox_max_attempts
        self.outbox_lease = dt.timedelta(seconds=outbox_lease_seconds)
        self.heartbeat_seconds = heartbeat_seconds or min(lease_seconds,
                                                          outbox_lease_seconds) / 3
        """How often a held resume job / outbox row has its lease renewed (a third of
        the shorter lease by default), so only a dead holder's lease ever runs out."""
        self.background_card_updates = background_card_updates
        """Run the post-commit attempt of ``update_card`` rows as a background task
        instead of awaiting it in ``respond``/``cancel``... (Feishu needs this: its card
        patch waits until the click's reply has been sent)."""
        self.seen_retention = dt.timedelta(seconds=seen_retention_seconds)
        self.outbox_retention = dt.timedelta(seconds=outbox_retention_seconds)
        self.housekeeping_interval = dt.timedelta(seconds=housekeeping_interval_seconds)
        self._last_housekeeping: dt.datetime | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._wake: asyncio.Event | None = None
        self._pokes = 0
        self._resume_nudges: set[asyncio.Event] = set()
        """How many times a resume was announced (``_poke``): a resume round that found
        the queue empty claims again only when this moved on."""
        self._outbox_wake: asyncio.Event | None = None
        self._batch: list[tuple[Callable[[Session], Any], asyncio.Future[Any]]] = []
        self._batch_task: asyncio.Task[None] | None = None
        self._batch_waiter: asyncio.Future[None] | None = None
        self._committing = False
        self.waiters = waiters.Waiters()
        """Callers waiting for a request's outcome (``bot.engine.waiters``)."""

    def apply_settings(self, settings: Settings) -> None:
        """Swap in a reloaded config (``bot.reload``): one assignment, so readers see
        the old or the new one. Agents added by it are built on first use; runtimes
        already built keep their definition until a restart."""
        factory = self._runtime_factory
        if getattr(factory, "__qualname__", "").startswith("registry_runtimes"):
            self._runtime_factory = registry_runtimes(settings)
        self.settings = settings

    dispatch_here: bool = True
    """False for a process without platforms (the admin CLI): side effects it queues are
    handed to the running bot's outbox loop instead of being tried here."""

    def _hand_over(self, claims: list[OutboxClaim]) -> None:
        with self.db.transaction() as session:
            for claim in claims:
                outbox.hand_over(session, claim, self.now())

    def register_adapter(
        self, adapter: PlatformAdapter, directory: Directory | None = None
    ) -> None:
        """Attach a platform; requests routed to it are delivered through ``adapter``."""
        self._adapters[adapter.platform] = (adapter, directory)

    def now(self) -> dt.datetime:
        """Naive UTC 'now' as stored in the database."""
        return to_db_time(self._clock())

    async def _tx(self, fn: Callable[[Session], T]) -> T:
        """Run ``fn`` in one transaction on a worker thread (sync SQLAlchemy).

        Side effects ``fn`` put in the outbox are tried right after the commit (and
        only if it committed), so callers cannot forget them and a crash cannot lose
        them: the rows stay claimed until their lease runs out, then the sweep retries.
        """

        def work() -> tuple[T, list[OutboxClaim], list[str]]:
            with self.db.transaction() as session:
                return self._with_effects(fn, session)

        result, claims, resolved = await asyncio.to_thread(work)
        await self._after_commit(claims, resolved)
        return result

    async def _grouped(self, fn: Callable[[Session], T]) -> T:
        """``_tx`` for a write that may share its transaction with others (group commit).

        ``fn`` runs in a ``_batched`` transaction together with whatever other writes
        were queued meanwhile (decisions, resume outcomes, outbox bookkeeping, dedupe
        keys), so a burst pays one commit (one fsync) for many of them. Like ``_tx``,
        the outbox side effects ``fn`` queued are tried after the commit, and waiters of
        the requests it resolved are woken. ``fn`` may run twice (its batch failed, then
        alone), always on a fresh transaction: it must only write through ``session``.
        """

        result, claims, resolved = await self._batched(partial(self._with_effects, fn))
        await self._after_commit(claims, resolved)
        return result

    def _with_effects(self, fn: Callable[[Session], T], session: Session
                      ) -> tuple[T, list[OutboxClaim], list[str]]:
        """``fn(session)`` plus what it left for after the commit: the outbox rows it
        claimed and the requests it resolved (their waiters get a NOTIFY on commit)."""
        result = fn(session)
        return result, outbox.taken(session), waiters.taken(session, self.db.is_postgres)

    async def _after_commit(self, claims: list[OutboxClaim], resolved: list[str]) -> None:
        """Wake this replica's long-polls, then try the side effects a commit queued."""
        self.waiters.wake(resolved)  # long-polls of this replica, right after the commit
        if not self.dispatch_here and claims:
            await asyncio.to_thread(self._hand_over, claims)
            claims = []
        for claim in claims:
            if self.background_card_updates and claim.kind == "update_card":
                task = asyncio.create_task(self._dispatch(claim))
                self._background.add(task)
                task.add_done_callback(self._background.discard)
            else:
                await self._dispatch(claim)

    async def _read(self, fn: Callable[[Session], T]) -> T:
        """Run the lookup ``fn`` on a snapshot on a worker thread (``Database.read``).

        It takes no write lock, so concurrent lookups run side by side and never wait
        for a compare-and-set; whatever ``fn`` writes is discarded. A decision made on
        what it returns must be re-checked under ``_tx`` (``_decide`` does).
        """

        def work() -> T:
            with self.db.read() as session:
                return fn(session)

        return await asyncio.to_thread(work)

    async def _batched(self, fn: Callable[[Session], T]) -> T:
        """Run the small write ``fn`` in a transaction shared with other queued ones.

        Group commit: while one batch commits, newcomers queue up, and the next batch
        runs all of them in one transaction. The caller is answered only after its
        batch has committed, so what it wrote is as durable as with ``_tx``; if it is
        cancelled meanwhile, the write still happens (shielded). If a batch fails, its
        steps are retried one transaction each, so one bad step fails only its caller.
        ``fn`` must not queue outbox side effects (they would not be dispatched).
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._batch.append((fn, future))
        waiter = self._batch_waiter
        if waiter is not None and not waiter.done() and waiter.get_loop() is loop:
            waiter.set_result(None)
        task = self._batch_task
        if task is None or task.done() or task.get_loop() is not loop:
            self._batch_task = loop.create_task(self._flush_batches())
        return await asyncio.shield(future)

    async def _flush_batches(self) -> None:
        """Commit queued ``_batched`` steps until the queue is empty.

        Batches run on a thread of their own, not the shared default pool: under a
        burst that pool is queued full of lookups, and every write of the process
        (decisions, resume claims and outcomes, outbox bookkeeping) waits for its batch.
        """
        loop = asyncio.get_running_loop()
        committer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="askhuman-commit")
        try:
            while True:
                batch = self._take_batch(loop)
                if not batch:
                    if await self._more_batches(BATCH_LINGER_SECONDS):
                        continue
                    return
                self._committing = True
                try:
                    outcomes = await loop.run_in_executor(committer, self._commit_batch,
                                                          [fn for fn, _ in batch])
                finally:
                    self._committing = False
                for (_, future), (ok, value) in zip(batch, outcomes, strict=True):
                    if future.done():
                        continue
                    try:
                        if ok:
                            future.set_result(value)
                        else:
                            future.set_exception(value)
                    except RuntimeError:  # its loop is gone (a caller from an old loop)
                        pass
        finally:
            committer.shutdown(wait=False)  # idle: the thread ends; the next flush starts one

    def _take_batch(self, loop: asyncio.AbstractEventLoop) -> list[tuple[Any, Any]]:
        """Take the queued steps of callers on ``loop`` (their futures are settled
        there); a caller on another loop is served by that loop's flusher."""
        mine = [entry for entry in self._batch if entry[1].get_loop() is loop]
        if mine:
            self._batch = [entry for entry in self._batch if entry[1].get_loop() is not loop]
        return mine

    async def _more_batches(self, linger: float) -> bool:
        """Keep the committer thread for ``linger`` seconds after the queue ran empty:
        True if work arrived meanwhile (a thread is started only after a quiet spell)."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._batch_waiter = waiter
        try:
            await asyncio.wait_for(waiter, linger)
        except TimeoutError:
            return any(entry[1].get_loop() is loop for entry in self._batch)
        finally:
            if self._batch_waiter is waiter:
                self._batch_waiter = None
        return True

    def _commit_batch(self, fns: list[Callable[[Session], Any]]) -> list[tuple[bool, Any]]:
        """One transaction for all of ``fns``; on failure, one transaction each."""
        try:
            with self.db.transaction() as session:
                together = [(True, fn(session)) for fn in fns]
            return together
        except Exception as exc:
            if len(fns) == 1:
                return [(False, exc)]
            log.warning("a batched write failed; retrying its steps one by one",
                        exc_info=True)
        alone: list[tuple[bool, Any]] = []
        for fn in fns:
            try:
                with self.db.transaction() as session:
                    alone.append((True, fn(session)))
            except Exception as exc:
                alone.append((False, exc))
        return alone

    async def drain(self, timeout: float = 10.0) -> None:
        """Wait for post-commit side effects and batched writes still in flight
        (shutdown, tests): after a normal shutdown nothing queued is lost."""
        pending: set[asyncio.Future[Any]] = set(self._background)
        if pending:
            await asyncio.wait(pending, timeout=timeout)
        task = self._batch_task  # it lingers when idle: wait for the queue, not the task
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (task is not None and not task.done() and task.get_loop() is loop
               and (self._committing or any(e[1].get_loop() is loop for e in self._batch))
               and loop.time() < deadline):
            await asyncio.sleep(0.005)

    def _poke(self) -> None:
        """Wake ``serve_forever`` early: a decision has a resume waiting."""
        self._pokes += 1
        for nudge in self._resume_nudges:  # resume rounds waiting on their running jobs
            nudge.set()
        if self._wake is not None:
            self._wake.set()

    def _poke_outbox(self) -> None:
        """Wake the outbox loop early: side effects were queued for it (expiry)."""
        if self._outbox_wake is not None:
            self._outbox_wake.set()

    def _heartbeat(
        self, model: type[Leased], row_id: int, token: str, lease: dt.timedelta
    ) -> Heartbeat[Leased]:
        """Keep our claim on ``row_id`` alive while its work runs (``async with``)."""
        return Heartbeat(self.db, self.now, model, row_id, token, lease, self.heartbeat_seconds)

    def _runtime(self, agent: str) -> AgentRuntime:
        """Runtimes are built on first use and kept, so each agent is set up once."""
        if agent not in self._runtimes:
            self._runtimes[agent] = self._runtime_factory(agent)
        return self._runtimes[agent]

    async def close_runtimes(self) -> None:
        """Close what agent runtimes keep open (MCP sessions and subprocesses): shutdown."""
        for name, runtime in list(self._runtimes.items()):
            close = getattr(runtime, "aclose", None)
            if close is None:
                continue
            try:
                await close()
            except Exception:
                log.warning("closing an agent runtime failed", exc_info=True,
                            extra={"agent": name})

    def _directory(self, platform: str) -> Directory | None:
        entry = self._adapters.get(platform)
        return entry[1] if entry else None

    def _load(self, session: Session, ref: str) -> Loaded | None:
        """The request behind ``ref`` with its run and current card (None if unknown)."""
        found = store.request_with_run(session, ref)
        if found is None:
            return None
        request, run, votes = found
        card = build_card(request, run.agent, votes)
        rules = policy.of(request, self.settings)
        card = policy.with_progress(session, request, card, rules)
        return request, run, localized(card, rules.route if rules else None)

    async def card(self, ref: str) -> RequestCard | None:
        """The request as it should be shown now, or None for an unknown ref."""
        loaded = await self._read(lambda s: self._load(s, ref))
        return loaded[2] if loaded else None

    def _enqueue_update(self, session: Session, request: HumanRequest) -> None:
        """Queue re-rendering every delivered copy of ``request``'s card."""
        outbox.enqueue(session, self.now(), self.outbox_lease, "update_card",
                       request_id=request.id, run_id=request.run_id,
                       payload={"ref": request.ref, "version": request.version})

    # ------------------------------------------------------------------ seams

    @abc.abstractmethod
    async def _dispatch(self, claim: OutboxClaim) -> None:
        """Try one claimed side effect and record how it went (``dispatch``)."""

    @abc.abstractmethod
    def _resolve_in(
        self, session: Session, ref: str, result: AskHumanToolResult, event: str,
        actor: Identity | None = None,
    ) -> RespondResult:
        """Compare-and-set a non-human outcome in the caller's transaction (``decisions``)."""
