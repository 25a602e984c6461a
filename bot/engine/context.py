"""What every engine service reads: the database, the clock, the settings and the knobs.

The services (``committer``, ``decisions``, ``runs``...) each name the other services
they call in their constructor; the plain facts they all share travel together in one
``EngineContext``, built once by ``core.Engine``. ``settings`` is swapped in one
assignment by a reload (``bot.reload``), so every service sees the old or the new
configuration, never a mix; ``tuning`` holds the knobs tests and operators turn.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from bot.engine.cards import to_db_time
from bot.engine.leases import Claimant, Hold
from bot.settings import Settings
from storage import Database

Clock = Callable[[], dt.datetime]
"""Returns an aware UTC datetime (tests pass a fake one)."""

WEBHOOK_BACKOFF: tuple[float, ...] = (5, 30, 120, 600, 1800, 3600, 7200, 14400)
"""Seconds between webhook attempts; the last one repeats. 14 attempts span ~28 h."""


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _seconds(value: float) -> dt.timedelta:
    return dt.timedelta(seconds=value)


@dataclass
class Tuning:
    """Retry, lease and retention knobs (see ``bot.engine`` for what each one bounds)."""

    max_attempts: int = 5
    """Tries of one resume before its run fails."""
    backoff_base: float = 2.0
    backoff_cap: float = 300.0
    lease: dt.timedelta = field(default_factory=lambda: _seconds(15))
    """How long a claimed resume job stays with its worker without a renewal."""
    outbox_max_attempts: int = 8
    outbox_lease: dt.timedelta = field(default_factory=lambda: _seconds(15))
    heartbeat_seconds: float = 5.0
    """How often a held resume job / outbox row has its lease renewed (a third of the
    shorter lease by default), so only a dead holder's lease ever runs out."""
    instance_beat: float = 1.0
    """How often this process's ``instances`` row is beaten (``bot.engine.instances``)."""
    holder_stale: dt.timedelta = field(default_factory=lambda: _seconds(4))
    """A holder whose heartbeat is older than this is presumed dead: its rows are taken
    over at once (four missed beats: a live process that stalls this long only costs
    a repeated attempt, never a second decision, thanks to the claim tokens)."""
    seen_retention: dt.timedelta = field(default_factory=lambda: _seconds(86400))
    outbox_retention: dt.timedelta = field(default_factory=lambda: _seconds(7 * 86400))
    housekeeping_interval: dt.timedelta = field(default_factory=lambda: _seconds(600))
    click_lease: dt.timedelta = field(default_factory=lambda: _seconds(10))
    """How long a stored click stays with the process that stored it before a worker
    may take it over (the live decision normally needs milliseconds)."""
    click_max_attempts: int = 5
    webhook_backoff: tuple[float, ...] = WEBHOOK_BACKOFF
    webhook_max_attempts: int = 14
    trigger_lease: dt.timedelta = field(default_factory=lambda: dt.timedelta(minutes=5))
    wait_recheck: float | None = None
    """A long-poll re-reads its request this often, in seconds (None: only when woken).
    Set when several processes share a SQLite file, which has no LISTEN/NOTIFY: another
    process's decision reaches the waiter within this bound instead of at its timeout
    (``watch_interval`` normally wakes it long before; this is the bound if it cannot)."""
    watch_interval: float | None = None
    """How often, in seconds, a process on a SQLite file shared with others checks
    whether another one committed (``sqlite_watch``), to wake its resume loop and its
    long-polls. None: nothing to hear (one process, or PostgreSQL's NOTIFY)."""
    watch_resumes: bool = False
    """The watch also looks for resumes other processes queued (``askhuman worker``:
    web processes queue resumes they do not run); a process that takes events in and
    runs its loops resumes its own decisions."""


@dataclass
class EngineContext:
    """The database, clock, current settings and knobs shared by the engine's services."""

    db: Database
    settings: Settings
    clock: Clock = utc_now
    tuning: Tuning = field(default_factory=Tuning)
    instance_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    """This engine's ``instances`` row: stamped on every queue row it holds."""

    def now(self) -> dt.datetime:
        """Naive UTC 'now' as stored in the database."""
        return to_db_time(self.clock())

    def claimant(self) -> Claimant:
        """Us, claiming now: our id, and when other holders' heartbeats count as stale."""
        return Claimant(self.instance_id, self.now() - self.tuning.holder_stale)

    def outbox_hold(self) -> Hold:
        """How an outbox row we enqueue is held (for our immediate post-commit try)."""
        return Hold(self.tuning.outbox_lease, self.instance_id)

    def start_hold(self) -> Hold:
        """How a run start we store is held while its first leg runs."""
        return Hold(self.tuning.lease, self.instance_id)

    def click_hold(self) -> Hold:
        """How a click we store is held while we decide it."""
        return Hold(self.tuning.click_lease, self.instance_id)
