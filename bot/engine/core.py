"""The ``Engine``: runs, requests, decisions, resumes and timeouts (see package docs).

``Engine`` is the one object platforms talk to. It is assembled from one mixin per
concern (``runs``, ``access`` + ``decisions``, ``delivery`` + ``dispatch``, ``sweeps``) on top of
``base.EngineBase``, which holds the shared state and the transaction helper; this
module adds the worker loop that drives them and the small health/housekeeping calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence

from pydantic import JsonValue
from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.engine import audit_chain, heap, housekeeping, inbox, store, waiters
from bot.engine.base import Clock, RuntimeFactory, log, registry_runtimes, targets_for, utc_now
from bot.engine.clicks import ClicksMixin
from bot.engine.dispatch import DispatchMixin
from bot.engine.external import ExternalMixin
from bot.engine.home import HomeMixin
from bot.engine.pending import PendingMixin
from bot.engine.ports import Identity
from bot.engine.results import RespondResult, UnknownAgentError
from bot.engine.runs import RunsMixin
from bot.engine.sweeps import SweepsMixin
from bot.engine.triggers import TriggersMixin
from renderers.card import RequestCard
from storage import Delivery, HumanRequest, OutboxItem, ResumeJob

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


class Engine(ExternalMixin, TriggersMixin, RunsMixin, ClicksMixin, PendingMixin,
             DispatchMixin, SweepsMixin, HomeMixin):
    """Platform-agnostic approval lifecycle. All methods are safe to call concurrently."""

    # ------------------------------------------------------------------ worker loop

    async def run_worker_once(self, limit: int = 50) -> int:
        """Process due resume jobs until none is left (or ``limit``); returns how many ran.

        First it retries due outbox side effects (up to ``limit``; not counted in the
        return value), so a delivery that gave up resolves ``unavailable`` and its resume
        runs in the same sweep, then decides stored clicks left behind (``recover_clicks``).
        """
        await self._sweep_outbox(limit)
        await self._maybe_prune()
        await self.recover_clicks(limit)
        return await self._resume_due(limit)

    async def serve_forever(self, stop: asyncio.Event, poll_interval: float = 2.0) -> None:
        """Run the worker loops until ``stop`` is set: timeouts, reminders, the outbox,
        stored clicks and resumes, each in its own loop so none waits behind another
        (a resume stuck behind a slow model call never delays a timeout). Decisions wake
        the resume loop early. The first call in a process freezes its startup heap
        (``heap``)."""
        heap.freeze_startup_heap()
        self._wake = asyncio.Event()
        self._outbox_wake = asyncio.Event()
        loops: list[tuple[str, Callable[[], Awaitable[object]], asyncio.Event | None]] = [
            ("timeouts", self.expire_due, None),
            ("reminders", self.remind_and_escalate_due, None),
            ("outbox", self._outbox_round, self._outbox_wake),
            ("clicks", self.recover_clicks, None),
            ("resumes", self._resume_round, self._wake),
            ("audit_seal", self.seal_audit, None),
        ]
        tasks = [self._loop(name, step, stop, poll_interval, wake)
                 for name, step, wake in loops]
        if self.db.is_postgres:  # other replicas' decisions wake our resume loop at once
            tasks.append(waiters.listen_forever(self.settings.database_url, self.waiters, stop))
        unsubscribe = self.waiters.subscribe(self._poke)
        try:
            await asyncio.gather(*tasks)
        finally:
            unsubscribe()

    async def seal_audit(self) -> int:
        """Chain the audit rows written since the last round (``audit_chain``)."""
        now = self.now()
        return await self._tx(lambda session: audit_chain.seal(session, now))

    async def _outbox_round(self) -> None:
        while await self._sweep_outbox_concurrently(OUTBOX_ROUND, OUTBOX_CONCURRENCY):
            pass  # a full round: more may be due (e.g. 10,000 timed-out cards)
        await self._maybe_prune()

    async def _resume_round(self) -> int:
        """Resume until the queue is empty: a full round (``RESUME_ROUND``) means more
        may be due, and the decisions that queued them may all have poked already."""
        done = 0
        while True:
            ran = await self._resume_due(RESUME_ROUND, self.settings.worker.resume_concurrency)
            done += ran
            if ran < RESUME_ROUND:
                return done

    @staticmethod
    async def _loop(
        name: str, step: Callable[[], Awaitable[object]], stop: asyncio.Event,
        poll_interval: float, wake: asyncio.Event | None,
    ) -> None:
        """Run ``step`` every ``poll_interval`` seconds (or when ``wake`` is set) until
        ``stop``; a failing round is logged and retried at the next interval."""
        while not stop.is_set():
            if wake is not None:
                wake.clear()
            try:
                await step()
            except Exception:
                log.exception("worker loop failed; retrying after the poll interval",
                              extra={"loop": name})
            waiters = {asyncio.ensure_future(stop.wait())}
            if wake is not None:
                waiters.add(asyncio.ensure_future(wake.wait()))
            await asyncio.wait(waiters, timeout=poll_interval,
                               return_when=asyncio.FIRST_COMPLETED)
            for task in waiters:
                task.cancel()

    # ------------------------------------------------------------------ event dedupe, refusals

    async def first_seen(self, platform: str, key: str) -> bool:
        """Record a platform event/callback id; True the first time, False for a repeat.

        One atomic INSERT into ``seen_events`` (shared by every replica), so a platform
        retry that reaches another process is recognized there as well. ``key`` names
        the kind and id, e.g. ``"event:Ev123"``, ``"nonce:abc"``, ``"message:om_1"``.
        Rows are pruned after ``seen_retention_seconds`` by the worker sweep. The insert
        is group-committed (``_batched``) with other dedupe keys and refusal audits.
        """
        now = self.now()
        return await self._batched(lambda s: housekeeping.mark_seen(s, now, platform, key))

    async def first_seen_chain(self, platform: str, keys: Sequence[str]) -> list[bool]:
        """``first_seen`` for several keys in one group-committed step (one transaction).

        Keys are recorded in order and the chain stops at the first repeat: the verdict
        list has one entry per key tried, True for each new one and a final False if one
        was already known (later keys are then not recorded, exactly as if ``first_seen``
        had been called for each in turn and the caller stopped at the first repeat).
        So ``[True, True]`` means every key was new; anything shorter, or ending in
        False, names the first known key. Feishu records a callback's nonce and event id
        this way, in the shared transaction it would have used for either alone.
        """
        now = self.now()
        wanted = list(keys)

        def mark(session: Session) -> list[bool]:
            verdicts: list[bool] = []
            for key in wanted:
                verdicts.append(housekeeping.mark_seen(session, now, platform, key))
                if not verdicts[-1]:
                    break
            return verdicts

        return await self._batched(mark)

    async def audit_refusal(
        self, ref: str | None, actor: Identity | None, reason: str,
        details: Mapping[str, JsonValue],
    ) -> None:
        """Audit a refusal an adapter decided (outcome ``refused``, event ``adapter_refused``).

        For *authenticated* requests only (signature-verified, or from an authenticated
        connection) that never reach the engine: a duplicate or stale callback, a click
        whose reference does not match its card... Unauthenticated junk is only logged
        by the adapters, so it cannot fill the database.
        """
        now = self.now()
        await self._batched(lambda s: store.audit(
            s, now, "adapter_refused", outcome="refused", ref=ref[:64] if ref else None,
            actor=actor, reason=reason[:2000], details=dict(details)))

    # ------------------------------------------------------------------ housekeeping

    async def prune_old(self) -> dict[str, int]:
        """Delete ``seen_events`` past ``seen_retention_seconds``, and ``done`` outbox rows
        and closed stored clicks past ``outbox_retention_seconds``, and apply the admin's
        ``retention:`` settings (answers, transcripts, audit rows); returns how many rows
        of each went."""
        now = self.now()
        self._last_housekeeping = now
        pruned = await asyncio.to_thread(housekeeping.prune, self.db, now, self.seen_retention,
                                         self.outbox_retention)
        pruned |= await asyncio.to_thread(housekeeping.apply_retention, self.db, now,
                                          self.settings.retention)
        pruned["click_inbox"] = await self._tx(  # closed clicks: as long as done outbox rows
            lambda s: inbox.prune(s, now - self.outbox_retention))
        if any(pruned.values()):
            log.info("old rows pruned", extra=pruned)
        return pruned

    async def _maybe_prune(self) -> None:
        """``prune_old`` at most once per ``housekeeping_interval_seconds`` (worker sweep)."""
        last = self._last_housekeeping
        if last is not None and self.now() - last < self.housekeeping_interval:
            return
        try:
            await self.prune_old()
        except Exception:
            log.exception("pruning old rows failed; retried at the next interval")

    # ------------------------------------------------------------------ queries

    async def find_by_message(self, platform: str, message_id: str) -> str | None:
        """The ref of the request delivered as ``message_id`` on ``platform``."""

        def find(session: Session) -> str | None:
            query = (select(HumanRequest.ref).join(Delivery, Delivery.request_id == HumanRequest.id)
                     .where(Delivery.platform == platform, Delivery.message_id == message_id))
            return session.scalars(query).first()

        return await self._read(find)

    async def card_for_message(
        self, platform: str, message_id: str
    ) -> tuple[str, RequestCard | None] | None:
        """``find_by_message`` and ``card`` in one snapshot read: the ref of the request
        delivered as ``message_id`` with its current card (None for an unknown message;
        the card is None only if the request vanished meanwhile)."""

        def find(session: Session) -> tuple[str, RequestCard | None] | None:
            query = (select(HumanRequest.ref).join(Delivery, Delivery.request_id == HumanRequest.id)
                     .where(Delivery.platform == platform, Delivery.message_id == message_id))
            ref = session.scalars(query).first()
            if ref is None:
                return None
            loaded = self._load(session, ref)
            return ref, loaded[2] if loaded else None

        return await self._read(find)

    async def job_states(self) -> dict[str, int]:
        """Resume-queue counts by state (for health checks and tests)."""

        def count(session: Session) -> dict[str, int]:
            out: dict[str, int] = {}
            for state in session.scalars(select(ResumeJob.state)):
                out[state] = out.get(state, 0) + 1
            return out

        return await self._read(count)

    async def outbox_states(self) -> dict[str, int]:
        """Outbox counts by state (for health checks and tests)."""

        def count(session: Session) -> dict[str, int]:
            out: dict[str, int] = {}
            for state in session.scalars(select(OutboxItem.state)):
                out[state] = out.get(state, 0) + 1
            return out

        return await self._read(count)
