"""The durable outbox: what platforms must still be told, claimed and retried like resumes.

A state change that needs a platform call (deliver a new request, re-render a decided
card, post a run's result) adds an outbox row *in its own transaction*, so the intent
commits with the change or not at all. The row is born claimed by the process that
wrote it (``running`` with a lease): that process tries the call right after the
commit, keeping the click-to-card-update latency low, and no other replica can race
it. If the call fails the row goes back to ``queued`` with backoff; if the process
dies the lease expires. Either way the worker sweep claims it again — with
``FOR UPDATE SKIP LOCKED`` on PostgreSQL and a conditional UPDATE on SQLite (every
SQLite transaction is ``BEGIN IMMEDIATE``), exactly as ``bot.engine.worker`` does.
Finishing is a compare-and-set on the claim token, so a worker that lost its lease
cannot mark someone else's attempt.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from sqlalchemy import CursorResult, Table, bindparam, insert, select, update
from sqlalchemy.orm import Session

from bot.engine.leases import NOBODY, Claimant, Hold, claim_oldest
from bot.engine.store import core, rowcount
from bot.engine.worker import LeaseLost
from bot.logs import scrub, scrub_json
from storage import OutboxItem

Kind = Literal["deliver_request", "update_card", "post_run_result", "remind", "webhook"]
PENDING_KEY = "askhuman.outbox"
"""``Session.info`` key holding the claims enqueued in the current transaction."""


@dataclass(frozen=True)
class OutboxClaim:
    """One outbox row this process holds until ``lease_until`` (a snapshot of the row)."""

    item_id: int
    kind: str
    token: str
    attempts: int
    request_id: int | None
    run_id: str | None
    platform: str | None
    payload: dict[str, Any] = field(default_factory=dict)
    created_at: dt.datetime | None = None
    """When the side effect was queued (naive UTC, as stored)."""


_TABLE = cast(Table, OutboxItem.__table__)
_INSERT = insert(_TABLE)
_FINISH = update(_TABLE).where(
    _TABLE.c.id == bindparam("item_id"), _TABLE.c.claim_token == bindparam("token"),
    _TABLE.c.state == "running")
_APPLIED = select(OutboxItem.payload).where(
    OutboxItem.request_id == bindparam("request_id"), OutboxItem.kind == "update_card",
    OutboxItem.state == "done")
"""Hot statements built once (see ``bot.engine.store``: building one costs more than
running it)."""


def enqueue(
    session: Session,
    now: dt.datetime,
    hold: Hold,
    kind: Kind,
    *,
    request_id: int | None = None,
    run_id: str | None = None,
    platform: str | None = None,
    payload: dict[str, Any] | None = None,
) -> OutboxClaim:
    """Record a side effect, already claimed by us for the immediate post-commit attempt.

    The claim is also remembered on the session so the engine can try it as soon as
    the transaction commits (see :func:`taken`).
    """
    token = uuid.uuid4().hex
    payload = payload or {}
    inserted = core(session).execute(_INSERT, {  # no ORM object or ORM path
        "kind": kind, "request_id": request_id, "run_id": run_id, "platform": platform,
        "payload": payload, "state": "running", "attempts": 1, "next_attempt_at": now,
        "lease_until": now + hold.lease, "claim_token": token, "holder": hold.holder,
        "created_at": now, "updated_at": now})
    key = cast("CursorResult[Any]", inserted).inserted_primary_key
    assert key is not None
    item_id = int(key[0])
    claim = OutboxClaim(item_id, kind, token, 1, request_id, run_id, platform,
                        dict(payload), now)
    session.info.setdefault(PENDING_KEY, []).append(claim)
    return claim


def taken(session: Session) -> list[OutboxClaim]:
    """The claims enqueued in this session's transaction (removed from the session)."""
    claims: list[OutboxClaim] = session.info.pop(PENDING_KEY, [])
    return claims


def _snapshot(item: OutboxItem, token: str, attempts: int) -> OutboxClaim:
    return OutboxClaim(item.id, item.kind, token, attempts, item.request_id, item.run_id,
                       item.platform, dict(item.payload or {}), item.created_at)


def claim_next(
    session: Session, now: dt.datetime, lease: dt.timedelta, postgres: bool,
    claimant: Claimant = NOBODY,
) -> OutboxClaim | None:
    """Claim the oldest runnable row (queued and due, or running with an expired lease
    or a dead holder)."""
    claimed = claim_oldest(session, OutboxItem, now, lease, postgres, claimant=claimant)
    if claimed is None:
        return None
    item, token, attempts = claimed
    return _snapshot(item, token, attempts)


def _finish(session: Session, claim: OutboxClaim, now: dt.datetime, **values: object) -> None:
    if isinstance(values.get("last_error"), str):
        values["last_error"] = scrub(str(values["last_error"]))  # errors may echo secrets
    finished = rowcount(core(session).execute(  # SET: the column names among the parameters
        _FINISH, {"item_id": claim.item_id, "token": claim.token, "updated_at": now,
                  **values}))
    if finished != 1:
        raise LeaseLost(f"outbox item {claim.item_id} was taken over by another worker")


def complete(
    session: Session, claim: OutboxClaim, now: dt.datetime,
    payload: dict[str, Any] | None = None,
) -> None:
    """Mark the side effect done; ``LeaseLost`` if another worker owns the row now.

    ``payload`` (when given) replaces the row's payload, e.g. to record which card
    version each delivery got (see :func:`applied_versions`).
    """
    extra: dict[str, Any] = {} if payload is None else {"payload": payload}
    _finish(session, claim, now, state="done", lease_until=None, last_error=None, **extra)


def applied_versions(session: Session, request_id: int) -> dict[str, int]:
    """The newest card version each delivery (``str(delivery.id)``) is known to show.

    Finished ``update_card`` rows record ``{"applied": {delivery_id: version}}`` in
    their payload, so every replica can skip re-sending a version that is not newer
    than what a copy already got (no deliveries column needed).
    """
    out: dict[str, int] = {}
    for payload in core(session).execute(_APPLIED, {"request_id": request_id}).scalars():
        applied = (payload or {}).get("applied") if isinstance(payload, dict) else None
        for key, version in (applied or {}).items():
            if isinstance(version, int):
                out[str(key)] = max(out.get(str(key), 0), version)
    return out


def retry_later(
    session: Session,
    claim: OutboxClaim,
    now: dt.datetime,
    delay: dt.timedelta,
    error: str,
    payload: dict[str, Any],
) -> None:
    """Release the row for a later sweep; ``payload`` keeps what the next try should skip.

    Its ``permanent`` map holds platform error texts, scrubbed like ``last_error``.
    """
    if isinstance(payload.get("permanent"), dict):
        payload = {**payload, "permanent": scrub_json(payload["permanent"])}
    _finish(session, claim, now, state="queued", next_attempt_at=now + delay,
            lease_until=None, claim_token=None, last_error=error, payload=payload)


def give_up(session: Session, claim: OutboxClaim, now: dt.datetime, error: str) -> None:
    _finish(session, claim, now, state="failed", lease_until=None, last_error=error)


@dataclass(frozen=True)
class Attempt:
    """How one try of a side effect went.

    ``error`` None means done. ``permanent`` means retrying cannot help (the platform
    refused for good, e.g. ``DeliveryError``). ``payload`` replaces the row's payload
    on a retry, e.g. to remember targets that failed for good and must not be retried.
    ``reason`` is what people may read about the failure, in words (``error`` keeps the
    platform's code for the log and the audit and is never shown in chat).
    """

    error: str | None = None
    permanent: bool = False
    payload: dict[str, Any] | None = None
    reason: str | None = None


def hand_over(session: Session, claim: OutboxClaim, now: dt.datetime) -> None:
    """Give a row this process claimed back to the queue, due now, untried: a process
    without platform adapters (the admin CLI) leaves the call to the running bot."""
    _finish(session, claim, now, state="queued", next_attempt_at=now, lease_until=None,
            claim_token=None, attempts=max(claim.attempts - 1, 0))
