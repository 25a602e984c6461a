"""This process's heartbeat, and noticing when another holder's has stopped.

Every queue row a process holds (a resume job, an outbox row, a stored click) names the
process (``holder``). A process that runs the worker loops registers an ``instances``
row and beats it every ``Tuning.instance_beat`` seconds. When a holder's heartbeat is
older than ``Tuning.holder_stale``, its rows are runnable for everyone else at once
(``leases.Claimant``), so work a killed process held is finished seconds after the
kill, instead of after its leases run out. Beating also *reaps*: it marks the
instances it finds stale as stopped (once) and wakes the loops that take rows over.

A live holder keeps its rows: its heartbeat is fresh. One that stalled past the limit
(a frozen VM) finds on its next beat that it was presumed dead; it logs that, comes
back, and at worst repeats an attempt: every finish is a compare-and-set on the
row's claim token, so nothing is decided or resumed twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import socket
from collections.abc import Callable

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from bot.engine.committer import log
from bot.engine.context import EngineContext
from bot.engine.store import rowcount
from bot.engine.wakeups import Wakeups
from storage import Instance

PRUNE_AFTER = dt.timedelta(days=1)
"""Instances gone this long are deleted (their rows were taken over long ago)."""

_Work = Callable[[Session], int]


class Instances:
    """``beat_forever``: register, beat, reap stale holders, and sign off on stop."""

    def __init__(self, ctx: EngineContext, wakeups: Wakeups) -> None:
        self._ctx = ctx
        self._wakeups = wakeups
        self.reaped = 0
        """Stale holders this process noticed (each one wakes the takeover loops)."""

    @property
    def id(self) -> str:
        return self._ctx.instance_id

    async def beat_forever(self, stop: asyncio.Event) -> None:
        """Register and beat until ``stop``; then mark this instance stopped, so what
        it still holds is free for the others at once. A failed beat (database briefly
        down) is logged and tried again at the next one."""
        try:
            while not stop.is_set():
                try:
                    await self.beat()
                except Exception:
                    log.warning("instance heartbeat failed; retrying", exc_info=True)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self._ctx.tuning.instance_beat)
        finally:
            try:
                await asyncio.to_thread(self._in_tx, self._stop)
            except Exception:
                log.warning("could not sign this instance off; others take its rows "
                            "over once its heartbeat is stale", exc_info=True)

    async def beat(self) -> int:
        """Beat once and reap stale holders; wakes the takeover loops if any were found.
        Returns how many holders were reaped."""
        reaped = await asyncio.to_thread(self._in_tx, self._beat_and_reap)
        if reaped:
            self.reaped += reaped
            log.warning("took over the work of stopped askhuman processes",
                        extra={"instances": reaped})
            self._wakeups.reclaim()
        return reaped

    def _in_tx(self, work: _Work) -> int:
        with self._ctx.db.transaction() as session:
            return work(session)

    def _register(self, session: Session) -> int:
        now = self._ctx.now()
        session.add(Instance(id=self.id, host=socket.gethostname()[:255], pid=os.getpid(),
                             started_at=now, heartbeat_at=now))
        log.info("instance registered", extra={"instance": self.id})
        return 0

    def _beat_and_reap(self, session: Session) -> int:
        now = self._ctx.now()
        mine = session.execute(select(Instance.stopped_at).where(Instance.id == self.id)).first()
        if mine is None:  # pruned while we stalled: register again
            self._register(session)
        else:
            if mine.stopped_at is not None:
                log.warning("this process was presumed dead (its heartbeat went stale); "
                            "rows it held may have been taken over",
                            extra={"instance": self.id})
            session.execute(update(Instance).where(Instance.id == self.id)
                            .values(heartbeat_at=now, stopped_at=None))
        stale = now - self._ctx.tuning.holder_stale
        return rowcount(session.execute(
            update(Instance)
            .where(Instance.heartbeat_at < stale, Instance.stopped_at.is_(None),
                   Instance.id != self.id)
            .values(stopped_at=now)
            .execution_options(synchronize_session=False)))

    def _stop(self, session: Session) -> int:
        now = self._ctx.now()
        session.execute(update(Instance).where(Instance.id == self.id).values(stopped_at=now))
        return 0


def prune(session: Session, now: dt.datetime) -> int:
    """Delete instances gone for a day (housekeeping): rows they held were taken over
    long ago, and a holder with no row falls back to its lease."""
    return rowcount(session.execute(
        delete(Instance).where(Instance.heartbeat_at < now - PRUNE_AFTER)
        .execution_options(synchronize_session=False)))
