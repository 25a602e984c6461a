"""The run-start inbox's rows: a start is stored before it is acknowledged, run from the row.

Slack never resends an acknowledged slash command (nor an acked event), and Feishu
never re-pushes a message it got a 200 for, so the listener first inserts the start
here, then acks, then runs the first leg. The row is born claimed by the listener
(``running`` with a lease and a claim token). The first leg's outcome commits with
``finish``, a compare-and-set on that token, so each start runs to its outcome exactly
once. A row left behind by a crash, or released after an error, is claimed again by
the worker (``claim_next``: queued and due, or its lease ran out).

States: running → done (the run started: its first leg's outcome is stored), or →
failed (it could not start; the starter is told), or → queued (retry later) → running.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, delete, update
from sqlalchemy.orm import Session

from bot.engine import leases
from bot.engine.ports import Identity, Origin
from bot.engine.store import rowcount
from bot.logs import scrub
from storage import RunStart

MAX_PROMPT_CHARS = 100_000
"""A longer prompt is refused before anything is stored (platforms send far less)."""


class StartTakenOver(Exception):
    """The row is no longer ours (its lease ran out and a worker claimed it): roll back."""


@dataclass(frozen=True)
class Start:
    """A run someone asked for on a platform: who, which agent, what, and where to report.

    ``run_id`` is chosen here, before anything is stored, so a retry after a crash
    makes the same run (the ``runs`` row is created with it, idempotently).
    ``origin.thread`` may be None when the adapter opens the run's thread itself
    (``ports.OpensThreads``: Slack's "started" message of a slash command).
    """

    agent: str
    prompt: str
    started_by: Identity
    origin: Origin
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)


@dataclass(frozen=True)
class StoredStart:
    """A start in the inbox, with the right to run it (row id and claim token)."""

    start: Start
    id: int
    token: str
    created_at: dt.datetime
    attempts: int = 1


def new_row(start: Start, now: dt.datetime, hold: leases.Hold, token: str) -> RunStart:
    """The row storing ``start``, claimed (``token``) by ``hold.holder`` until
    ``now + hold.lease``."""
    who, origin = start.started_by, start.origin
    return RunStart(
        run_id=start.run_id, agent=start.agent[:200], prompt=start.prompt,
        started_by_platform=who.platform[:32], started_by_user=who.user_id[:200],
        started_by_name=who.display_name[:200] if who.display_name else None,
        started_by_team=who.team[:64] if who.team else None,
        started_by_enterprise=who.enterprise[:64] if who.enterprise else None,
        origin_platform=origin.platform[:32],
        origin_channel=origin.channel[:200] if origin.channel else None,
        origin_thread=origin.thread[:200] if origin.thread else None,
        state="running", attempts=1, next_attempt_at=now, lease_until=now + hold.lease,
        claim_token=token, holder=hold.holder, created_at=now, updated_at=now)


def to_start(row: RunStart) -> Start:
    """The start a row stores (as the listener described it)."""
    who = Identity(row.started_by_platform, row.started_by_user, row.started_by_name,
                   team=row.started_by_team, enterprise=row.started_by_enterprise)
    origin = Origin(row.origin_platform, row.origin_channel, row.origin_thread)
    return Start(row.agent, row.prompt, who, origin, run_id=row.run_id)


def _ours(stored: StoredStart) -> Any:
    return and_(RunStart.id == stored.id, RunStart.claim_token == stored.token,
                RunStart.state == "running")


def _set(session: Session, stored: StoredStart, now: dt.datetime, **values: Any) -> bool:
    return rowcount(session.execute(
        update(RunStart).where(_ours(stored)).values(updated_at=now, **values)
        .execution_options(synchronize_session=False))) == 1


def hold(session: Session, stored: StoredStart, now: dt.datetime, lease: dt.timedelta,
         thread: str | None = None) -> None:
    """Renew our lease (and note the run's thread, once it has one) in the caller's
    transaction; ``StartTakenOver`` when the row is no longer ours."""
    values: dict[str, Any] = {"lease_until": now + lease}
    if thread is not None:
        values["origin_thread"] = thread[:200]
    if not _set(session, stored, now, **values):
        raise StartTakenOver(f"run start {stored.id} was taken over by another worker")


def finish(session: Session, stored: StoredStart, now: dt.datetime, outcome: str,
           state: str = "done", error: str | None = None) -> None:
    """Close the row in the transaction that stores what became of the start (the first
    leg's outcome, or the refusal). ``StartTakenOver`` (→ the whole transaction rolls
    back) when the row is no longer ours: its new holder finishes it instead."""
    if not _set(session, stored, now, state=state, outcome=outcome, lease_until=None,
                last_error=scrub(error)[:2000] if error else None):
        raise StartTakenOver(f"run start {stored.id} was taken over by another worker")


def release(session: Session, stored: StoredStart, now: dt.datetime, delay: dt.timedelta,
            error: str) -> None:
    """Give the row back for a retry after ``delay`` (storing the outcome failed)."""
    _set(session, stored, now, state="queued", next_attempt_at=now + delay, lease_until=None,
         claim_token=None, last_error=scrub(error)[:2000])


def claim_next(session: Session, now: dt.datetime, lease: dt.timedelta,
               postgres: bool, claimant: leases.Claimant = leases.NOBODY) -> StoredStart | None:
    """Claim the oldest start a worker should run: queued and due, or running with an
    expired lease or a dead holder (it died before the first leg's outcome was stored)."""
    claimed = leases.claim_oldest(session, RunStart, now, lease, postgres, claimant=claimant)
    if claimed is None:
        return None
    row, token, attempts = claimed
    return StoredStart(to_start(row), row.id, token, row.created_at, attempts)


def prune(session: Session, before: dt.datetime) -> int:
    """Delete closed rows (done, failed) last touched before ``before``; how many went."""
    return rowcount(session.execute(
        delete(RunStart).where(RunStart.state.in_(("done", "failed")),
                               RunStart.updated_at < before)
        .execution_options(synchronize_session=False)))
