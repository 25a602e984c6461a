"""Dispatch: run one claimed outbox item, then record whether it is done, retried or dead.

Items arrive two ways: right after the commit that queued them (the ``Committer``'s
``on_commit`` hook, ``after_commit``) and from the worker sweep (``sweep``) for items
that failed earlier or were left behind by a dead process. What each kind of item does
is a ``Handler`` in the registry the ``Outbox`` is built with (``delivery`` for the
platform calls, ``external`` for webhooks). Bookkeeping is a compare-and-set on the claim token,
so a worker whose lease ran out can never mark another worker's attempt.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial

from sqlalchemy.orm import Session

from bot.askhuman.schema import unavailable_result
from bot.engine import outbox, store, worker
from bot.engine.committer import Committer, log
from bot.engine.context import EngineContext
from bot.engine.leases import Heartbeat
from bot.engine.outbox import Attempt, OutboxClaim
from bot.engine.ports import UNDELIVERABLE_REASON
from bot.engine.reply_order import cards_after_reply
from bot.engine.resolver import Resolver
from bot.engine.wakeups import Background
from bot.logs import scrub
from storage import OutboxItem


@dataclass(frozen=True)
class Handler:
    """What one outbox kind does, and how long it is retried.

    ``send`` runs the side effect once (it must be safe to repeat: ``delivery``);
    ``max_attempts`` and ``delay`` override the platform defaults (webhooks retry for
    about a day).
    """

    send: Callable[[OutboxClaim], Awaitable[Attempt]]
    max_attempts: Callable[[], int] | None = None
    delay: Callable[[OutboxClaim], dt.timedelta] | None = None


class Outbox:
    """Try outbox items with their kind's ``Handler``; settle, retry or give up."""

    def __init__(self, ctx: EngineContext, committer: Committer, resolver: Resolver,
                 background: Background, handlers: Mapping[str, Handler]) -> None:
        self._ctx = ctx
        self._committer = committer
        self._resolver = resolver
        self._background = background
        self.handlers = dict(handlers)
        self.dispatch_here = True
        """False for a process without platforms (the admin CLI): side effects it queues
        are handed to the running bot's outbox loop instead of being tried here."""

    async def after_commit(self, claims: list[OutboxClaim]) -> None:
        """Try the side effects a commit queued (from the ``Committer``'s ``on_commit``).

        The caller waits for them, in order, but cannot cancel them: they run in a task
        of their own (``Background``), so a caller that goes away (an HTTP client that
        hung up, an MCP session that closed once it had its answer) never leaves a
        committed card update waiting for its lease to run out. A card update after a
        click from a platform that shows patches only after the click's reply is not
        waited for at all (``reply_order.cards_after_reply``)."""
        if not self.dispatch_here:
            await asyncio.to_thread(self._hand_over, claims)
            return
        waited = []
        for claim in claims:
            if claim.kind == "update_card" and cards_after_reply():
                self._background.start(self.dispatch(claim))
            else:
                waited.append(claim)
        if waited:
            await asyncio.shield(self._background.start(self._dispatch_in_order(waited)))

    async def _dispatch_in_order(self, claims: list[OutboxClaim]) -> None:
        for claim in claims:
            await self.dispatch(claim)

    def _hand_over(self, claims: list[OutboxClaim]) -> None:
        with self._ctx.db.transaction() as session:
            for claim in claims:
                outbox.hand_over(session, claim, self._ctx.now())

    async def dispatch(self, claim: OutboxClaim) -> None:
        """Try one claimed side effect and record how it went; never raises.

        If recording fails too, the row keeps its lease and the sweep retries it later.
        """
        extra = {"outbox_id": claim.item_id, "kind": claim.kind, "attempt": claim.attempts}
        try:
            if claim.attempts > self.attempt_limit(claim):
                attempt = Attempt("the side effect kept crashing the worker", permanent=True)
            else:
                async with Heartbeat(self._ctx.db, self._ctx.now, OutboxItem, claim.item_id,
                                     claim.token, self._ctx.tuning.outbox_lease,
                                     self._ctx.tuning.heartbeat_seconds):
                    attempt = await self._attempt(claim)
            await self._settle(claim, attempt)
        except worker.LeaseLost:
            log.warning("outbox lease lost; another worker owns the side effect", extra=extra)
        except Exception:
            log.exception("outbox dispatch failed; the sweep retries it", extra=extra)

    async def _attempt(self, claim: OutboxClaim) -> Attempt:
        """Run the side effect once; an unexpected error is a transient failure."""
        handler = self.handlers.get(claim.kind)
        if handler is None:
            return Attempt(f"unknown outbox kind {claim.kind!r}", permanent=True)
        try:
            return await handler.send(claim)
        except Exception as exc:
            log.exception("outbox side effect crashed", extra={"outbox_id": claim.item_id})
            return Attempt(str(exc) or type(exc).__name__)

    async def _settle(self, claim: OutboxClaim, attempt: Attempt) -> None:
        """Mark the row done, schedule a retry with backoff, or give up (audited)."""
        if attempt.error is None:  # group-committed with the other writes in flight
            await self._committer.batched(
                lambda s: outbox.complete(s, claim, self._ctx.now(), attempt.payload))
            return
        # The error ends up in last_error, the audit log and an ``unavailable`` result
        # that the agent and the card show: never with a secret an API error echoed.
        error = scrub(attempt.error)
        if attempt.permanent or claim.attempts >= self.attempt_limit(claim):
            await self._committer.tx(partial(self._outbox_give_up, claim=claim, error=error,
                                             reason=attempt.reason))
            return
        delay = self.delay(claim)
        payload = claim.payload if attempt.payload is None else attempt.payload

        def retry(session: Session) -> None:
            now = self._ctx.now()
            outbox.retry_later(session, claim, now, delay, error, payload)
            store.audit(session, now, "outbox_retry", outcome="error", run_id=claim.run_id,
                        ref=claim.payload.get("ref"), reason=error,
                        details={"kind": claim.kind, "attempt": claim.attempts,
                                 "delay_seconds": delay.total_seconds()})

        await self._committer.tx(retry)

    def attempt_limit(self, claim: OutboxClaim) -> int:
        """How many attempts a side effect gets (its handler may say: webhooks)."""
        handler = self.handlers.get(claim.kind)
        if handler is not None and handler.max_attempts is not None:
            return handler.max_attempts()
        return self._ctx.tuning.outbox_max_attempts

    def delay(self, claim: OutboxClaim) -> dt.timedelta:
        """The wait before the next attempt (its handler may say: webhooks)."""
        handler = self.handlers.get(claim.kind)
        if handler is not None and handler.delay is not None:
            return handler.delay(claim)
        tuning = self._ctx.tuning
        return worker.backoff(claim.attempts, tuning.backoff_base, tuning.backoff_cap)

    def _outbox_give_up(
        self, session: Session, *, claim: OutboxClaim, error: str, reason: str | None = None
    ) -> None:
        """Fail the row; an undeliverable request is resolved ``unavailable`` in the same
        transaction, so the agent is resumed instead of waiting for its timeout.

        ``error`` (platform codes) goes to the row and the ``outbox_failed`` audit; the
        agent and the people reading its answer get ``reason``, in words.
        """
        now = self._ctx.now()
        outbox.give_up(session, claim, now, error)
        ref = claim.payload.get("ref")
        store.audit(session, now, "outbox_failed", outcome="error", run_id=claim.run_id,
                    ref=ref, reason=error,
                    details={"kind": claim.kind, "attempt": claim.attempts})
        if claim.kind != "deliver_request" or ref is None or claim.request_id is None:
            return
        if claim.payload.get("route"):
            return  # an escalation's extra copies: the original delivery stands
        if store.deliveries(session, claim.request_id):
            return
        result = unavailable_result(undeliverable_message(reason))
        self._resolver.resolve_in(session, ref, result, "unavailable")

    async def sweep_concurrently(self, limit: int, concurrency: int) -> bool:
        """Claim up to ``limit`` due side effects and try ``concurrency`` at a time;
        True when the round was full (more may be due).

        Each claim is its own leased row, so running them side by side changes nothing
        about exactly-once: a card update is versioned and a post is keyed. The rows of
        one request run one after another, in order, so an older card version never
        lands after a newer one. Platform rate limits are the adapters' business (they
        retry 429s with Retry-After).
        """
        gate = asyncio.Semaphore(concurrency)
        claims: list[OutboxClaim] = []
        while len(claims) < limit:
            claim = await self._committer.tx(lambda s: outbox.claim_next(
                s, self._ctx.now(), self._ctx.tuning.outbox_lease, self._ctx.db.is_postgres,
                self._ctx.claimant()))
            if claim is None:
                break
            claims.append(claim)

        by_request: dict[object, list[OutboxClaim]] = {}
        for claim in claims:  # one request's rows stay in order (card versions)
            key = claim.request_id if claim.request_id is not None else ("item", claim.item_id)
            by_request.setdefault(key, []).append(claim)

        async def attempt(group: list[OutboxClaim]) -> None:
            async with gate:
                for claim in group:
                    await self.dispatch(claim)

        await asyncio.gather(*(attempt(group) for group in by_request.values()))
        return len(claims) == limit

    async def sweep(self, limit: int) -> int:
        """Retry due side effects (failed earlier, or left behind by a dead process)."""
        done = 0
        while done < limit:
            claim = await self._committer.tx(lambda s: outbox.claim_next(
                s, self._ctx.now(), self._ctx.tuning.outbox_lease, self._ctx.db.is_postgres,
                self._ctx.claimant()))
            if claim is None:
                break
            await self.dispatch(claim)
            done += 1
        return done


def undeliverable_message(reason: str | None) -> str:
    """The ``unavailable`` result's message: what happened in words, no raw API text."""
    return f"The request could not be delivered to anyone. {reason or UNDELIVERABLE_REASON}"
