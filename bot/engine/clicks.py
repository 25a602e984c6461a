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
import dataclasses
import datetime as dt
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

from sqlalchemy.orm import Session

from bot.engine import inbox, store, worker
from bot.engine.base import log
from bot.engine.decisions import DecisionsMixin
from bot.engine.inbox import Click, Recorded
from bot.engine.ports import Identity
from bot.engine.results import RespondResult

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

Teller = Callable[[Identity, Mapping[str, str], str], Awaitable[None]]


class ClicksMixin(DecisionsMixin):
    """The click inbox: record before the ack, decide exactly once, recover after a crash."""

    click_lease = dt.timedelta(seconds=30)
    """How long a stored click stays with the process that stored it before a worker
    may take it over (the live decision normally needs milliseconds)."""
    click_max_attempts = 5

    async def record_click(self, click: Click, budget: float = RECORD_BUDGET) -> Recorded | None:
        """Store ``click`` durably within ``budget`` seconds; None if that was not possible.

        None means nothing was (or will be) decided from this click: tell the clicker
        to try again. Raises ``ClickTooLarge`` for oversize values (nothing stored).
        """
        inbox.check_size(click)
        received = self.now()
        cutoff = time.monotonic() + max(0.0, budget - RECORD_MARGIN)
        lease = self.click_lease

        def insert(session: Session) -> inbox.Mark | None:
            session.connection()  # SQLite: BEGIN IMMEDIATE; the write lock is ours from here
            if time.monotonic() > cutoff:
                return None
            return inbox.insert(session, received, lease, click)

        task = asyncio.ensure_future(self._batched(insert))
        extra = {"platform": click.platform, "ref": click.ref[:64], "user": click.responder.user_id}
        try:
            mark = await asyncio.wait_for(asyncio.shield(task), max(budget, 0.0))
        except TimeoutError:
            log.warning("click not recorded within its budget; the clicker is told to retry",
                        extra={**extra, "budget_seconds": budget})
            self._track(asyncio.ensure_future(self._abandon(task)))
            return None
        except Exception:
            log.exception("recording a click failed; the clicker is told to retry", extra=extra)
            return None
        if mark is None:
            log.warning("database too busy to record a click in time; the clicker is told "
                        "to retry", extra={**extra, "budget_seconds": budget})
            return None
        return Recorded(click, mark)

    async def abandon_click(self, recorded: Recorded) -> None:
        """The clicker was already told their click was not recorded (their reply could
        not wait any longer): close the stored row unused, so nothing decides from it."""
        done: asyncio.Future[inbox.Mark | None] = asyncio.get_running_loop().create_future()
        done.set_result(recorded.mark)
        await self._abandon(done)

    async def _abandon(self, task: asyncio.Future[inbox.Mark | None]) -> None:
        """The caller gave up waiting: if the insert still committed, close the row
        unused (the clicker was told to click again)."""
        try:
            mark = await task
        except Exception:
            return
        if mark is not None:
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
        return await self._respond(click.ref, click.responder, click.action_id, click.values,
                                   mark)

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
        entry = self._adapters.get(platform)
        teller = getattr(entry[0], "tell_clicker", None) if entry else None
        return cast("Teller | None", teller)
