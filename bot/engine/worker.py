"""The durable resume queue: claim a job with a lease, complete it, retry it or give up.

A job is claimed by a conditional UPDATE that must hit exactly one row (on PostgreSQL
the candidate is also picked with ``FOR UPDATE SKIP LOCKED``; on SQLite every
transaction is ``BEGIN IMMEDIATE``). Completion is a compare-and-set on the claim
token, committed in the same transaction as the resume's outcome, so a resume takes
effect exactly once even if a worker dies or loses its lease.
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass

from sqlalchemy import Update, bindparam, update
from sqlalchemy.orm import Session

from bot.engine.leases import NOBODY, Claimant, LeaseLost, claim_many, claim_oldest
from bot.engine.store import rowcount
from bot.logs import scrub
from storage import ResumeJob

__all__ = ["Claim", "LeaseLost", "backoff", "claim_batch", "claim_next", "complete", "give_up",
           "retry_later"]


@dataclass(frozen=True)
class Claim:
    """A job this worker holds until ``lease_until``."""

    job_id: int
    request_id: int
    run_id: str
    token: str
    attempts: int


def claim_next(
    session: Session, now: dt.datetime, lease: dt.timedelta, postgres: bool,
    claimant: Claimant = NOBODY,
) -> Claim | None:
    """Claim the oldest runnable job (queued and due, or running with an expired lease
    or a dead holder)."""
    claimed = claim_oldest(session, ResumeJob, now, lease, postgres, claimant=claimant)
    if claimed is None:
        return None
    job, token, attempts = claimed
    return Claim(job.id, job.request_id, job.run_id, token, attempts)


def claim_batch(
    session: Session, now: dt.datetime, lease: dt.timedelta, postgres: bool, limit: int,
    claimant: Claimant = NOBODY,
) -> list[Claim]:
    """Claim up to ``limit`` runnable jobs, oldest first, in the caller's transaction
    (one statement: ``leases.claim_many``)."""
    return [Claim(job_id, request_id, run_id, token, attempts)
            for job_id, token, attempts, (request_id, run_id) in claim_many(
                session, ResumeJob, now, lease, postgres, limit,
                "request_id", "run_id", claimant=claimant)]


def _finish(session: Session, claim: Claim, now: dt.datetime, **values: object) -> None:
    if isinstance(values.get("last_error"), str):
        values["last_error"] = scrub(str(values["last_error"]))  # errors may echo secrets
    finished = rowcount(session.connection().execute(
        _finish_statement(tuple(sorted(values))),
        {"job": claim.job_id, "token": claim.token, "v_updated_at": now,
         **{f"v_{key}": value for key, value in values.items()}},
    ))
    if finished != 1:
        raise LeaseLost(f"resume job {claim.job_id} was taken over by another worker")


@functools.cache
def _finish_statement(keys: tuple[str, ...]) -> Update:
    """The compare-and-set that ends a claim, setting ``keys``: built once per kind of
    ending and run as plain SQL (building and ORM-executing it each time cost ~0.2 ms)."""
    return (update(ResumeJob)
            .where(ResumeJob.id == bindparam("job"), ResumeJob.claim_token == bindparam("token"),
                   ResumeJob.state == "running")
            .values({key: bindparam(f"v_{key}") for key in ("updated_at", *keys)}))


def complete(session: Session, claim: Claim, now: dt.datetime) -> None:
    """Mark the job done; raise ``LeaseLost`` (→ roll back everything) if it is not ours."""
    _finish(session, claim, now, state="done", lease_until=None, last_error=None)


def retry_later(
    session: Session, claim: Claim, now: dt.datetime, delay: dt.timedelta, error: str
) -> None:
    _finish(
        session,
        claim,
        now,
        state="queued",
        next_attempt_at=now + delay,
        lease_until=None,
        claim_token=None,
        last_error=error,
    )


def give_up(session: Session, claim: Claim, now: dt.datetime, error: str) -> None:
    _finish(session, claim, now, state="failed", lease_until=None, last_error=error)


def backoff(attempts: int, base: float, cap: float) -> dt.timedelta:
    """Exponential backoff: base, 2·base, 4·base … capped."""
    return dt.timedelta(seconds=min(cap, base * 2 ** max(0, attempts - 1)))
