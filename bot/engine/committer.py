"""The one way the engine touches the database: transactions, snapshot reads, group commit.

``tx`` runs a function in one write transaction on a worker thread; ``read`` runs a
lookup on a snapshot without the write lock (on the event loop itself on SQLite);
``batched`` runs a small write (an audit row, a dedupe key, an outbox completion, a
resume claim) in a transaction shared with the other writes queued meanwhile (group
commit), so a burst costs a few commits instead of one each (on SQLite, on the event
loop itself whenever the write lock is free, else on the committer thread);
``grouped`` is ``tx`` through that same group commit (decisions, resume outcomes).

After a commit, the committer wakes this replica's long-polls of the requests it
resolved and hands what it queued (``Committed``: the outbox rows it claimed, whether
it queued resumes or rows for the outbox loop) to its ``on_commit`` hook, which the
composition root points at the ``Outbox`` and the loops' ``Wakeups``. So no caller has
to remember to try a side effect or poke a loop, and a crash cannot lose them either:
the rows stay claimed until their lease runs out, then the sweep retries them.
Exactly one ``Committer`` runs per process (``core.Engine`` builds it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from sqlalchemy.orm import Session

from bot.engine import outbox, queued, store, tracing, waiters
from bot.engine.outbox import OutboxClaim
from storage import Database
from storage.kept_sessions import WriteLockBusy

log = logging.getLogger("askhuman.engine")

T = TypeVar("T")
BATCH_LINGER_SECONDS = 1.0
"""How long the group-commit thread waits for more work before it ends."""
INLINE_COMMIT_LIMIT = 0.02
"""Seconds the ``COMMIT`` of a group commit on the event loop (its ``fsync``: 0.3 ms
on a local disk) may take before the next ones go to the committer thread for
``INLINE_PAUSE`` seconds (``Committer._commit``). The steps' own work is not counted:
it holds the GIL, so it blocks the loop on the thread as well."""
INLINE_PAUSE = 10.0


@dataclass(frozen=True)
class Committed:
    """What a committed transaction left for others to do."""

    claims: list[OutboxClaim]
    """Outbox rows it queued, claimed by this process for an immediate try."""
    resolved: list[str]
    """Refs it resolved (their long-polls are woken)."""
    resumes_queued: bool = False
    """It queued resume jobs (``queued.resumes``)."""
    outbox_queued: bool = False
    """It queued outbox rows for the outbox loop (``queued.outbox_rows``)."""
    spans: tuple[tracing.Note, ...] = ()
    """Spans it noted (``bot.engine.tracing``), ended now that it committed."""
    slots: tuple[Any, ...] = ()
    """Resume slots it held (``queued.hold``): their claimed resumes start now."""

    @property
    def quiet(self) -> bool:
        """Nothing for the hook to do."""
        return not (self.claims or self.resumes_queued or self.outbox_queued or self.slots)


CommitHook = Callable[[Committed], Awaitable[None]]
"""Called after a commit that left something to do (see ``Committed``)."""


class Committer:
    """Write transactions on worker threads, lookups, group commit, and what runs after
    a commit."""

    def __init__(self, database: Database, waiting: waiters.Waiters) -> None:
        self._db = database
        self._reads_inline = not database.is_postgres
        """SQLite: lookups run on the event loop (``read``)."""
        self._waiters = waiting
        self._on_commit: CommitHook | None = None
        self._batch: list[tuple[Callable[[Session], Any], asyncio.Future[Any]]] = []
        self._batch_task: asyncio.Task[None] | None = None
        self._batch_waiter: asyncio.Future[None] | None = None
        self._committing = False
        self._inline_after = 0.0
        """``time.monotonic()`` before which batches commit on the thread (a slow one
        ran on the loop)."""

    def on_commit(self, hook: CommitHook) -> None:
        """Set what tries the side effects a commit queued (the ``Outbox``)."""
        self._on_commit = hook

    async def tx(self, fn: Callable[[Session], T]) -> T:
        """Run ``fn`` in one transaction on a worker thread (sync SQLAlchemy).

        Side effects ``fn`` put in the outbox are tried right after the commit (and
        only if it committed), so callers cannot forget them and a crash cannot lose
        them: the rows stay claimed until their lease runs out, then the sweep retries.
        """

        def work() -> tuple[T, Committed]:
            with self._db.transaction() as session:
                return self._with_effects(fn, session)

        result, committed = await asyncio.to_thread(work)
        await self._after_commit(committed)
        return result

    async def grouped(self, fn: Callable[[Session], T], *,
                      effects: Callable[[Coroutine[Any, Any, None]], object] | None = None
                      ) -> T:
        """``tx`` for a write that may share its transaction with others (group commit).

        ``fn`` runs in a ``batched`` transaction together with whatever other writes
        were queued meanwhile (decisions, resume outcomes, outbox bookkeeping, dedupe
        keys), so a burst pays one commit (one fsync) for many of them. Like ``tx``,
        the outbox side effects ``fn`` queued are tried after the commit, and waiters of
        the requests it resolved are woken. ``fn`` may run twice (its batch failed, then
        alone), always on a fresh transaction: it must only write through ``session``.

        ``effects`` takes what runs after the commit (a coroutine) instead of awaiting
        it here: a caller that must not wait for the platform calls its commit queued
        (a resume slot, freed once the outcome is stored) runs it as a task it keeps.
        """

        result, committed = await self.batched(partial(self._with_effects, fn))
        if effects is None:
            await self._after_commit(committed)
        else:
            effects(self._after_commit(committed))
        return result

    def _with_effects(self, fn: Callable[[Session], T], session: Session
                      ) -> tuple[T, Committed]:
        """``fn(session)`` plus what it left for after the commit: the outbox rows it
        claimed, the requests it resolved (their waiters get a NOTIFY on commit) and
        whether it queued work for the loops."""
        result = fn(session)
        claims = outbox.taken(session)
        resolved = waiters.taken(session, self._db.is_postgres)
        resumes, rows = queued.taken(session)
        return result, Committed(claims, resolved, resumes, rows, tuple(tracing.taken(session)),
                                 queued.slots(session))

    async def _after_commit(self, committed: Committed) -> None:
        """Wake this replica's long-polls, then hand the rest to the ``on_commit`` hook."""
        # long-polls of this replica, at once; its loops are woken by ``on_commit`` below
        self._waiters.wake(committed.resolved, announce=False)
        if committed.spans:
            tracing.emit(list(committed.spans))
        if not committed.quiet and self._on_commit is not None:
            await self._on_commit(committed)

    async def drain(self, timeout: float = 10.0) -> None:
        """Wait until the batched writes still queued on this loop have committed."""
        task = self._batch_task  # it lingers when idle: wait for the queue, not the task
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (task is not None and not task.done() and task.get_loop() is loop
               and (self._committing or any(e[1].get_loop() is loop for e in self._batch))
               and loop.time() < deadline):
            await asyncio.sleep(0.005)

    async def read(self, fn: Callable[[Session], T], *, aside: bool = False) -> T:
        """Run the lookup ``fn`` on a snapshot (``Database.read``).

        It takes no write lock, so lookups never wait for a compare-and-set; whatever
        ``fn`` writes is discarded. A decision made on what it returns must be
        re-checked under ``tx`` (``Decider`` does).

        On SQLite the lookup runs right here, on the event loop: a WAL snapshot never
        waits for a writer, and a lookup is Python work that holds the GIL wherever it
        runs, so a hop to a worker thread and back only added CPU (thread wake-ups, the
        GIL handed over, caches gone cold): one ``serve`` decided 8–11 % more per second
        without it (``benchmarks/README.md``, "Lookups on the event loop"). PostgreSQL's
        lookups wait for the network, so they run on a worker thread. So does a lookup
        read ``aside``: one that later callers join while it runs (``ClickCheck``'s
        shared reads), for which the loop must go on taking them meanwhile.
        """
        if self._reads_inline and not aside:
            with self._db.lookup() as session:  # the loop's kept connection (SQLite)
                return fn(session)
        return await asyncio.to_thread(self._read_now, fn)

    def _read_now(self, fn: Callable[[Session], T]) -> T:
        with self._db.read() as session:
            return fn(session)

    async def batched(self, fn: Callable[[Session], T]) -> T:
        """Run the small write ``fn`` in a transaction shared with other queued ones.

        Group commit: while one batch commits, newcomers queue up, and the next batch
        runs all of them in one transaction. The caller is answered only after its
        batch has committed, so what it wrote is as durable as with ``tx``; if it is
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
        """Commit queued ``batched`` steps until the queue is empty.

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
                    outcomes = await self._commit(loop, committer, [fn for fn, _ in batch])
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

    async def _commit(self, loop: asyncio.AbstractEventLoop, committer: ThreadPoolExecutor,
                      fns: list[Callable[[Session], Any]]) -> list[tuple[bool, Any]]:
        """One batch: right here on the event loop when SQLite's write lock is free now,
        else on the committer thread, which waits for the lock (the loop never does).

        The batch's Python work holds the GIL wherever it runs; on the thread, the
        commit also paid for handing the GIL back and forth (every SQLite call lets it
        go, and taking it back waits while the loop runs), inside the write lock: one
        ``serve`` spent ~1.5 ms more CPU per decision and held the lock ~85 % of the
        time (``benchmarks/README.md``, "Group commits on the event loop"). Here the
        loop waits for the commit's ``fsync`` instead (~0.3 ms). A ``COMMIT`` slower
        than ``INLINE_COMMIT_LIMIT`` (a slow disk) sends the batches to the thread for
        ``INLINE_PAUSE`` seconds, so a stalling disk never stalls the loop for long.
        """
        done = self._commit_here(fns) if time.monotonic() >= self._inline_after else []
        if len(done) < len(fns):  # the lock was taken: the rest waits for it on the thread
            done += await loop.run_in_executor(committer, self.commit_batch, fns[len(done):])
        return done

    def _commit_here(self, fns: list[Callable[[Session], Any]]) -> list[tuple[bool, Any]]:
        """``commit_batch`` on this thread without waiting for the write lock: the
        results of the steps it committed (none if another writer held the lock)."""
        held = self._db.free_write_lock()
        if held is None:
            return []
        try:
            return self.commit_batch(fns, begin=self._db.transaction_now)
        finally:
            held.release()
            self._pause_if_slow(self._db.last_commit_seconds())

    def _pause_if_slow(self, took: float) -> None:
        if took > INLINE_COMMIT_LIMIT:
            self._inline_after = time.monotonic() + INLINE_PAUSE
            log.warning("a COMMIT on the event loop was slow (the disk?); committing on a "
                        "thread for a while", extra={"commit_ms": round(took * 1000, 1),
                                                     "pause_s": INLINE_PAUSE})

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

    def commit_batch(self, fns: list[Callable[[Session], Any]],
                     begin: Callable[[], AbstractContextManager[Session]] | None = None
                     ) -> list[tuple[bool, Any]]:
        """One transaction for all of ``fns``; on failure, one transaction each.

        ``begin`` is how a transaction starts (``Database.transaction`` by default).
        With ``Database.transaction_now``, which never waits, a write lock found taken
        stops it: only the steps before that have results (none if it was the first),
        and the caller commits the others elsewhere."""
        begin = begin or self._db.transaction
        try:
            with begin() as session:
                store.hold_audits(session)  # all the steps' audit rows: one statement
                together = [(True, fn(session)) for fn in fns]
                store.write_held_audits(session)
            return together
        except WriteLockBusy:
            return []
        except Exception as exc:
            if len(fns) == 1:
                return [(False, exc)]
            log.warning("a batched write failed; retrying its steps one by one",
                        exc_info=True)
        alone: list[tuple[bool, Any]] = []
        for fn in fns:
            try:
                with begin() as session:
                    store.hold_audits(session)
                    value = fn(session)
                    store.write_held_audits(session)
                alone.append((True, value))
            except WriteLockBusy:
                break
            except Exception as exc:
                alone.append((False, exc))
        return alone
