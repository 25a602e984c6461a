"""Clicks: stored before the platform is told "got it", then decided from the stored row.

Slack never resends an acknowledged click, and a Feishu toast is the acknowledgement,
so an adapter calls ``record_click`` first (one group-committed insert, bounded by a
time budget), acks only once it returns a ``Recorded``, then calls ``decide_click``.
If the database cannot take the click within the budget, ``record_click`` returns None
and guarantees nothing will be decided from it: the adapter shows an error instead of
a silent ack. Clicks left behind (a crash right after the ack, an error while deciding)
are claimed by ``recover_clicks`` in the worker, decided, and the clicker is told
through the adapter's optional ``tell_clicker``. See ``bot.engine.inbox`` for the rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot import metrics
from bot.engine import housekeeping, inbox, store, worker
from bot.engine.base import log
from bot.engine.inbox import Click, Recorded
from bot.engine.ports import Identity
from bot.engine.results import RespondResult
from bot.engine.withdraw import WithdrawMixin
from storage import Database, Delivery, HumanRequest

RECORD_BUDGET = 2.5
"""Seconds a listener may spend storing a click before it must ack (Slack allows 3)."""
RECORD_MARGIN = 0.3
"""The insert is skipped if it only gets the write lock this close to the budget's end,
so a click the caller gave up on is (almost) never stored; see ``_abandon``."""
NOT_RECORDED = ("I couldn't record your answer just now (the database is busy); "
                "nothing was changed. Please click again.")
DEFERRED = ("Your answer was received, but askhuman couldn't finish processing it yet; "
            "it will retry and tell you the outcome.")
GAVE_UP = ("askhuman received your answer but couldn't process it after several tries; "
           "nothing was changed. Please click again.")
UNKNOWN_MESSAGE = "This card is not active (yet); please try again in a moment."
WRONG_MESSAGE = "This card does not match its request."

Teller = Callable[[Identity, Mapping[str, str], str], Awaitable[None]]


class ClicksMixin(WithdrawMixin):
    """The click inbox: record before the ack, decide exactly once, recover after a crash."""

    click_lease = dt.timedelta(seconds=30)
    """How long a stored click stays with the process that stored it before a worker
    may take it over (the live decision normally needs milliseconds)."""
    click_max_attempts = 5

    async def record_click(self, click: Click, budget: float = RECORD_BUDGET,
                           seen: Sequence[str] = ()) -> Recorded | None:
        """Store ``click`` durably within ``budget`` seconds; None if that was not possible.

        None means nothing was (or will be) decided from this click: tell the clicker
        to try again. Raises ``ClickTooLarge`` for oversize values (nothing stored).

        ``seen``: dedupe keys (``engine.first_seen``'s, e.g. a callback's nonce, then its
        event id) recorded in the click's own transaction, so a burst of callbacks costs
        one commit instead of two; raises ``AlreadySeen`` (nothing stored) when one was
        recorded before, the first key checked first.
        """
        inbox.check_size(click)
        received = self.now()
        started = time.monotonic()
        token = uuid.uuid4().hex
        cutoff = time.monotonic() + max(0.0, budget - RECORD_MARGIN)
        future = self._click_writer().submit(
            inbox.new_row(click, received, self.click_lease, token), cutoff, tuple(seen),
            orphan=lambda row_id: self._track(asyncio.ensure_future(
                self._close_unused(inbox.Mark(row_id, token, received)))))
        extra = {"platform": click.platform, "ref": click.ref[:64], "user": click.responder.user_id}
        try:
            # The future itself is awaited (one hop once it is settled, where
            # wait_for(shield(...)) took three, each a turn of a loop busy with the
            # burst); if it is cancelled (timeout), the writer closes the row unused.
            async with asyncio.timeout(max(budget, 0.0)):
                row_id = await future
        except TimeoutError:
            log.warning("click not recorded within its budget; the clicker is told to retry",
                        extra={**extra, "budget_seconds": budget})
            return None
        except inbox.AlreadySeen:
            raise
        except Exception:
            log.exception("recording a click failed; the clicker is told to retry", extra=extra)
            return None
        if row_id is None:
            log.warning("database too busy to record a click in time; the clicker is told "
                        "to retry", extra={**extra, "budget_seconds": budget})
            return None
        metrics.observe_click_stored(click.platform, time.monotonic() - started)
        return Recorded(click, inbox.Mark(row_id, token, received))

    def _click_writer(self) -> ClickWriter:
        writer: ClickWriter | None = self.__dict__.get("_clicks_writer")
        if writer is None:
            writer = self.__dict__["_clicks_writer"] = ClickWriter(self.db)
        return writer

    async def abandon_click(self, recorded: Recorded) -> None:
        """The clicker was already told their click was not recorded (their reply could
        not wait any longer): close the stored row unused, so nothing decides from it."""
        await self._close_unused(recorded.mark)

    async def _close_unused(self, mark: inbox.Mark) -> None:
        """Close a stored row nobody will decide: the clicker was told to click again
        (their wait ran out, ``record_click``'s ``orphan``) or was already answered."""
        now = self.now()
        await self._batched(lambda s: inbox.close(
            s, mark, now, "failed", outcome="abandoned", message=NOT_RECORDED,
            was=("running",)))

    def _track(self, task: asyncio.Future[Any]) -> None:
        """Keep a background task alive and let ``drain`` wait for it."""
        self._background.add(cast("asyncio.Task[None]", task))
        task.add_done_callback(self._background.discard)

    async def decide_click(self, recorded: Recorded) -> RespondResult:
        """Decide a click ``record_click`` stored; never raises.

        The stored row is closed in the decision's (or refusal's) own transaction. If
        deciding fails, the row is handed to the worker, which retries and tells the
        clicker; the answer then says so (outcome ``recorded``, message ``DEFERRED``).
        """
        click, mark = recorded.click, recorded.mark
        try:
            return await self._decide_click(click, mark)
        except inbox.ClickTakenOver:
            log.warning("a worker took the click over; it tells the clicker",
                        extra={"ref": click.ref[:64], "inbox_id": mark.id})
        except Exception as exc:
            log.exception("deciding a stored click failed; the worker retries it",
                          extra={"ref": click.ref[:64], "inbox_id": mark.id})
            await self._release_click(mark, exc, 1)
        return RespondResult("recorded", DEFERRED)

    async def _decide_click(self, click: Click, mark: inbox.Mark) -> RespondResult:
        if click.kind == "attach":
            return await self._attach(click.ref, click.responder, click.values, mark)
        refused = await self._wrong_message(click, mark)
        if refused is not None:
            return refused
        if click.kind == "withdraw":  # bot.engine.withdraw
            return await self.withdraw(click.ref, click.responder, mark=mark)
        return await self._respond(click.ref, click.responder, click.action_id, click.values,
                                   mark, self._optional(click.platform, "read_click"),
                                   show=False)

    async def _wrong_message(self, click: Click, mark: inbox.Mark) -> RespondResult | None:
        """For adapters whose clicks name the message they came from
        (``clicks_name_their_message``, Feishu): refuse, audited and closing the row, a
        click from a message that is not a card of the request it claims (fail closed:
        an unknown message too). One indexed read; None when the click may go on."""
        message_id = click.reply_to.get("message")
        if not message_id or not self._optional(click.platform, "clicks_name_their_message"):
            return None
        delivered = await self._read(lambda s: s.scalars(
            select(HumanRequest.ref).join(Delivery, Delivery.request_id == HumanRequest.id)
            .where(Delivery.platform == click.platform, Delivery.message_id == message_id)
        ).first())
        if delivered == click.ref:
            return None
        if delivered is None:
            text, check = UNKNOWN_MESSAGE, {"check": "unknown_message"}
        else:
            text, check = WRONG_MESSAGE, {"check": "ref_mismatch", "card_ref": delivered}
        details: dict[str, Any] = {"platform": click.platform, **check,
                                   "message_id": message_id[:200]}
        return await self._refuse("rejected", text, click.ref, click.responder,
                                  "adapter_refused", details=details, mark=mark)

    async def _release_click(self, mark: inbox.Mark, exc: BaseException, attempts: int,
                             state: str = "running") -> None:
        """Give the row back for a retry with backoff (if that fails too, its lease runs
        out and a worker takes it anyway)."""
        delay = worker.backoff(attempts, self.backoff_base, self.backoff_cap)
        error = str(exc) or type(exc).__name__
        try:
            await self._tx(lambda s: inbox.release(s, mark, self.now(), delay, error,
                                                   state=state))
        except Exception:
            log.exception("could not release a stored click; its lease will run out",
                          extra={"inbox_id": mark.id})

    # ------------------------------------------------------------------ the worker

    async def recover_clicks(self, limit: int = 50) -> int:
        """Decide stored clicks nobody finished (their holder died, or deciding failed)
        and tell each clicker the outcome; returns how many rows were handled."""
        handled = 0
        while handled < limit:
            claimed = await self._tx(lambda s: inbox.claim_next(
                s, self.now(), self.click_lease, self.db.is_postgres))
            if claimed is None:
                break
            await self._recover(claimed)
            handled += 1
        return handled

    async def _recover(self, claimed: inbox.Claimed) -> None:
        click = claimed.click
        teller = self._teller(click.platform)
        mark = dataclasses.replace(claimed.mark, then="telling" if teller else "done")
        extra = {"ref": click.ref[:64], "inbox_id": mark.id, "attempt": claimed.attempts}
        outcome, message = claimed.outcome or "", claimed.message or ""
        if claimed.state != "telling":
            if claimed.attempts > self.click_max_attempts:
                outcome, message = "failed", GAVE_UP
                await self._tx(lambda s: self._give_up_click(s, claimed, mark, teller))
            else:
                try:
                    answer = await self._decide_click(click, mark)
                except inbox.ClickTakenOver:
                    return
                except Exception as exc:
                    log.warning("deciding a stored click failed; retrying later",
                                extra={**extra, "error": str(exc)[:500]})
                    await self._release_click(mark, exc, claimed.attempts)
                    return
                outcome, message = answer.outcome, answer.message
            log.info("stored click decided by the worker", extra={**extra, "outcome": outcome})
        if teller is not None:
            await self._tell(teller, claimed, mark, outcome, message)

    def _give_up_click(self, session: Session, claimed: inbox.Claimed, mark: inbox.Mark,
                       teller: Teller | None) -> None:
        now = self.now()
        inbox.close(session, mark, now, "telling" if teller else "failed", outcome="failed",
                    message=GAVE_UP, was=("running",))
        store.audit(session, now, "click_failed", outcome="error", ref=claimed.click.ref[:64],
                    actor=claimed.click.responder, reason=GAVE_UP,
                    details={"inbox_id": mark.id, "attempts": claimed.attempts - 1})

    async def _tell(self, teller: Teller, claimed: inbox.Claimed, mark: inbox.Mark,
                    outcome: str, message: str) -> None:
        """Tell the clicker what became of their click, then close the row."""
        click = claimed.click
        try:
            await teller(click.responder, click.reply_to, message)
        except Exception as exc:
            log.warning("telling a clicker failed", extra={
                "ref": click.ref[:64], "inbox_id": mark.id, "error": str(exc)[:500]})
            if claimed.attempts < self.click_max_attempts:
                await self._release_click(mark, exc, claimed.attempts, state="telling")
                return
        final = "failed" if outcome == "failed" else "done"
        await self._tx(lambda s: inbox.close(s, mark, self.now(), final, was=("telling",)))

    def _teller(self, platform: str) -> Teller | None:
        """The adapter's optional ``tell_clicker(who, reply_to, text)``."""
        return cast("Teller | None", self._optional(platform, "tell_clicker"))

    def _optional(self, platform: str, name: str) -> Any:
        """An optional method of ``platform``'s adapter (None if absent)."""
        entry = self._adapters.get(platform)
        return getattr(entry[0], name, None) if entry else None


class ClickWriter:
    """Group commit for stored clicks: whatever arrived while the previous batch was
    committing goes in with one INSERT, on a thread of its own, so a burst of clicks
    costs a few short transactions and never waits for the shared thread pool.

    The thread takes the next batch itself as soon as a commit is done, without a trip
    through the event loop: during a burst the loop is busy parsing the next requests,
    and a batch that had to wait for its turn there held every queued click (and so its
    ack) for as long as the burst lasted (measured: ~235 ms of 100 concurrent clicks).
    Only the results go back to the loop, one ``call_soon_threadsafe`` per batch.

    ``submit`` answers the row id, or None when the write lock came only after the
    click's ``cutoff`` (``time.monotonic``): such a click is not stored at all.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        self._lock = threading.Lock()
        self._queue: list[tuple[Item, Waiter]] = []
        self._draining = False
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="askhuman-clicks")

    def submit(self, row: dict[str, Any], cutoff: float, seen: tuple[str, ...] = (),
               orphan: Orphan | None = None) -> asyncio.Future[int | None]:
        """Queue ``row``; the future answers its id. ``orphan(row_id)`` is called (on the
        loop) if the row was stored after the future had been cancelled: nobody acked
        that click, so the caller closes the row unused."""
        future: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        with self._lock:
            self._queue.append(((row, cutoff, seen), Waiter(future, orphan)))
            start, self._draining = not self._draining, True
        if start:
            try:
                self._thread.submit(self._drain)
            except BaseException:
                with self._lock:
                    self._draining = False
                raise
        return future

    def _drain(self) -> None:
        """(committer thread) Commit batch after batch until the queue is empty."""
        try:
            while True:
                with self._lock:
                    batch, self._queue = self._queue, []
                    if not batch:
                        self._draining = False
                        return
                try:
                    outcomes = self._commit_each([item for item, _ in batch])
                except Exception as exc:  # pragma: no cover - _commit_each reports per row
                    outcomes = [exc] * len(batch)
                _hand_back(batch, outcomes)
        except BaseException:
            with self._lock:
                self._draining = False
            raise

    def _commit_each(self, items: list[Item]) -> list[int | BaseException | None]:
        """One transaction for the batch; if it fails, one per row (a bad row fails alone)."""
        try:
            return list(self._commit(items))
        except Exception as exc:
            if len(items) == 1:
                return [exc]
            log.warning("a batch of stored clicks failed; storing them one by one",
                        exc_info=True)
        alone: list[int | BaseException | None] = []
        for item in items:
            try:
                alone.extend(self._commit([item]))
            except Exception as exc:
                alone.append(exc)
        return alone

    def _commit(self, items: list[Item]) -> list[int | BaseException | None]:
        with self._db.transaction() as session:
            session.connection()  # SQLite: BEGIN IMMEDIATE; the write lock is ours from here
            now = time.monotonic()
            keep = [i for i, (_, cutoff, _) in enumerate(items) if now <= cutoff]
            ids: list[int | BaseException | None] = [None] * len(items)
            repeats = _dedupe(session, items, keep)
            for i, key in repeats.items():
                ids[i] = inbox.AlreadySeen(key)
            keep = [i for i in keep if i not in repeats]
            if keep:
                stored = inbox.insert_many(session, [items[i][0] for i in keep])
                for i, row_id in zip(keep, stored, strict=True):
                    ids[i] = row_id
        return ids


Item = tuple[dict[str, Any], float, tuple[str, ...]]
"""A click row to store, its cutoff (``time.monotonic``) and its dedupe keys."""
Outcome = int | BaseException | None


Orphan = Callable[[int], object]
"""Called with the id of a row stored for a caller that no longer waits."""


@dataclasses.dataclass(frozen=True)
class Waiter:
    """Who waits for a queued click: its future, and what to do with a row stored
    after the future was cancelled."""

    future: asyncio.Future[int | None]
    orphan: Orphan | None = None


def _hand_back(batch: list[tuple[Item, Waiter]], outcomes: list[Outcome]) -> None:
    """(committer thread) Settle each click's future on its own event loop, one call
    per loop and batch. A loop that is gone has nobody waiting: its rows stay claimed
    until their lease runs out, and the worker decides them."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Waiter, Outcome]]] = {}
    for (_, waiter), outcome in zip(batch, outcomes, strict=True):
        by_loop.setdefault(waiter.future.get_loop(), []).append((waiter, outcome))
    for loop, settled in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the loop is closed
            loop.call_soon_threadsafe(_settle, settled)


def _settle(settled: list[tuple[Waiter, Outcome]]) -> None:
    for waiter, outcome in settled:
        future = waiter.future
        if future.cancelled():
            if isinstance(outcome, int) and waiter.orphan is not None:
                waiter.orphan(outcome)
        elif future.done():
            continue
        elif isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)


def _dedupe(session: Session, items: list[Item], keep: list[int]) -> dict[int, str]:
    """Record the dedupe keys of the clicks in ``keep``, key position by key position
    (every first key in one statement, then the second keys of those still new...), so
    a repeated first key (a nonce) stops the later ones, as ``first_seen_chain`` does.
    Returns, per click with a repeat, the first key already recorded (or taken by an
    earlier click of this batch)."""
    repeats: dict[int, str] = {}
    depth = max((len(items[i][2]) for i in keep), default=0)
    for position in range(depth):
        at = [i for i in keep if i not in repeats and len(items[i][2]) > position]
        by_platform: dict[str, list[int]] = {}
        for i in at:
            by_platform.setdefault(str(items[i][0]["platform"]), []).append(i)
        for platform, members in by_platform.items():
            received = items[members[0]][0]["received_at"]
            keys = [items[i][2][position] for i in members]
            fresh = housekeeping.mark_seen_many(session, received, platform, keys)
            for i in members:
                key = items[i][2][position]
                if key in fresh:
                    fresh.discard(key)  # the first click of the batch with it gets it
                else:
                    repeats[i] = key
    return repeats
