"""Dispatch: run one claimed outbox item, then record whether it is done, retried or dead.

Items arrive two ways: right after the commit that queued them (``EngineBase._tx``)
and from the worker sweep (``_sweep_outbox``) for items that failed earlier or were
left behind by a dead process. Bookkeeping is a compare-and-set on the claim token,
so a worker whose lease ran out can never mark another worker's attempt.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable
from functools import partial

from sqlalchemy.orm import Session

from bot.askhuman.schema import unavailable_result
from bot.engine import outbox, store, worker
from bot.engine.base import log
from bot.engine.delivery import DeliveryMixin
from bot.engine.outbox import Attempt, OutboxClaim
from bot.engine.ports import UNDELIVERABLE_REASON
from bot.logs import scrub
from storage import OutboxItem

Handler = Callable[[OutboxClaim], Awaitable[Attempt]]


class DispatchMixin(DeliveryMixin):
    """Try outbox items with the ``delivery`` handlers; settle, retry or give up."""

    async def _dispatch(self, claim: OutboxClaim) -> None:
        """Try one claimed side effect and record how it went; never raises.

        If recording fails too, the row keeps its lease and the sweep retries it later.
        """
        extra = {"outbox_id": claim.item_id, "kind": claim.kind, "attempt": claim.attempts}
        try:
            if claim.attempts > self._outbox_attempt_limit(claim):
                attempt = Attempt("the side effect kept crashing the worker", permanent=True)
            else:
                async with self._heartbeat(OutboxItem, claim.item_id, claim.token,
                                           self.outbox_lease):
                    attempt = await self._attempt(claim)
            await self._settle(claim, attempt)
        except worker.LeaseLost:
            log.warning("outbox lease lost; another worker owns the side effect", extra=extra)
        except Exception:
            log.exception("outbox dispatch failed; the sweep retries it", extra=extra)

    async def _attempt(self, claim: OutboxClaim) -> Attempt:
        """Run the side effect once; an unexpected error is a transient failure."""
        handlers: dict[str, Handler] = {
            "deliver_request": self._send_request, "update_card": self._send_update,
            "post_run_result": self._send_result, "remind": self._send_reminders}
        handler = handlers.get(claim.kind)
        if handler is None:
            return Attempt(f"unknown outbox kind {claim.kind!r}", permanent=True)
        try:
            return await handler(claim)
        except Exception as exc:
            log.exception("outbox side effect crashed", extra={"outbox_id": claim.item_id})
            return Attempt(str(exc) or type(exc).__name__)

    async def _settle(self, claim: OutboxClaim, attempt: Attempt) -> None:
        """Mark the row done, schedule a retry with backoff, or give up (audited)."""
        if attempt.error is None:  # group-committed with the other writes in flight
            await self._batched(lambda s: outbox.complete(s, claim, self.now(), attempt.payload))
            return
        # The error ends up in last_error, the audit log and an ``unavailable`` result
        # that the agent and the card show: never with a secret an API error echoed.
        error = scrub(attempt.error)
        if attempt.permanent or claim.attempts >= self._outbox_attempt_limit(claim):
            await self._tx(partial(self._outbox_give_up, claim=claim, error=error,
                                   reason=attempt.reason))
            self._poke()
            return
        delay = self._outbox_delay(claim)
        payload = claim.payload if attempt.payload is None else attempt.payload

        def retry(session: Session) -> None:
            now = self.now()
            outbox.retry_later(session, claim, now, delay, error, payload)
            store.audit(session, now, "outbox_retry", outcome="error", run_id=claim.run_id,
                        ref=claim.payload.get("ref"), reason=error,
                        details={"kind": claim.kind, "attempt": claim.attempts,
                                 "delay_seconds": delay.total_seconds()})

        await self._tx(retry)

    def _outbox_attempt_limit(self, claim: OutboxClaim) -> int:
        """How many attempts a side effect gets (webhooks override: ``external``)."""
        return self.outbox_max_attempts

    def _outbox_delay(self, claim: OutboxClaim) -> dt.timedelta:
        """The wait before the next attempt (webhooks override: ``external``)."""
        return worker.backoff(claim.attempts, self.backoff_base, self.backoff_cap)

    def _outbox_give_up(
        self, session: Session, *, claim: OutboxClaim, error: str, reason: str | None = None
    ) -> None:
        """Fail the row; an undeliverable request is resolved ``unavailable`` in the same
        transaction, so the agent is resumed instead of waiting for its timeout.

        ``error`` (platform codes) goes to the row and the ``outbox_failed`` audit; the
        agent and the people reading its answer get ``reason``, in words.
        """
        now = self.now()
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
        self._resolve_in(session, ref, result, "unavailable")

    async def _sweep_outbox_concurrently(self, limit: int, concurrency: int) -> bool:
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
            claim = await self._tx(lambda s: outbox.claim_next(
                s, self.now(), self.outbox_lease, self.db.is_postgres))
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
                    await self._dispatch(claim)

        await asyncio.gather(*(attempt(group) for group in by_request.values()))
        return len(claims) == limit

    async def _sweep_outbox(self, limit: int) -> int:
        """Retry due side effects (failed earlier, or left behind by a dead process)."""
        done = 0
        while done < limit:
            claim = await self._tx(lambda s: outbox.claim_next(
                s, self.now(), self.outbox_lease, self.db.is_postgres))
            if claim is None:
                break
            await self._dispatch(claim)
            done += 1
        return done


def undeliverable_message(reason: str | None) -> str:
    """The ``unavailable`` result's message: what happened in words, no raw API text."""
    return f"The request could not be delivered to anyone. {reason or UNDELIVERABLE_REASON}"
