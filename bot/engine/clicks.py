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
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy.orm import Session

from bot import metrics
from bot.engine import inbox, store, worker
from bot.engine.access import Authorizer
from bot.engine.attachments import Attachments
from bot.engine.batch_reader import read_batch_click
from bot.engine.card_messages import CardMessages
from bot.engine.click_writer import ClickWriter
from bot.engine.committer import Committer, log
from bot.engine.context import EngineContext
from bot.engine.decisions import Decider
from bot.engine.inbox import Click, Recorded
from bot.engine.platforms import Platforms
from bot.engine.ports import TellsClickers
from bot.engine.reply_order import deciding_for
from bot.engine.results import RespondResult
from bot.engine.wakeups import Background
from bot.engine.withdraw import Withdrawals
from renderers.batch import is_batch_token
from renderers.words import Said, said, verbatim

RECORD_BUDGET = 2.5
"""Seconds a listener may spend storing a click before it must ack (Slack allows 3)."""
RECORD_MARGIN = 0.3
"""The insert is skipped if it only gets the write lock this close to the budget's end,
so a click the caller gave up on is (almost) never stored; see ``_abandon``."""
NOT_RECORDED = said("click.not_recorded")
DEFERRED = said("click.deferred")
GAVE_UP = said("click.gave_up")
UNKNOWN_MESSAGE = said("refused.unknown_card")
WRONG_MESSAGE = said("refused.wrong_card")


class CardNotRecordedYet(Exception):
    """A click names a message askhuman has not recorded while the request's card is
    still being posted (``store.card_being_posted``): the stored click is decided
    again after a backoff (the worker), not refused as an unknown card."""


def _delivered(session: Session, messages: CardMessages, click: Click, message_id: str
               ) -> tuple[str | None, bool]:
    """``ClickInbox._card_of``'s read. Whether the request's card is still being posted
    is asked only when the message is not (yet) known as a card."""
    card = messages.read(session, click.platform, message_id)
    if card is not None:
        return card[0], False
    return None, store.card_being_posted(session, click.ref)


class ClickInbox:
    """The click inbox: record before the ack, decide exactly once, recover after a crash."""

    def __init__(self, ctx: EngineContext, committer: Committer, decider: Decider,
                 attachments: Attachments, withdrawals: Withdrawals, authorizer: Authorizer,
                 platforms: Platforms, background: Background,
                 messages: CardMessages) -> None:
        self._ctx = ctx
        self._committer = committer
        self._decider = decider
        self._attachments = attachments
        self._withdrawals = withdrawals
        self._authorizer = authorizer
        self._platforms = platforms
        self._background = background
        self._writer: ClickWriter | None = None
        self._messages = messages

    async def record_click(self, click: Click, budget: float = RECORD_BUDGET,
                           seen: Sequence[str] = ()) -> Recorded | None:
        """Store ``click`` durably within ``budget`` seconds; None if that was not possible.

        None means nothing was (or will be) decided from this click: tell the clicker
        to try again. Raises ``ClickTooLarge`` for oversize values (nothing stored).

        ``seen``: dedupe keys (``Housekeeping.first_seen``'s, e.g. a callback's nonce, then its
        event id) recorded in the click's own transaction, so a burst of callbacks costs
        one commit instead of two; raises ``AlreadySeen`` (nothing stored) when one was
        recorded before, the first key checked first.
        """
        inbox.check_size(click)
        received = self._ctx.now()
        started = time.monotonic()
        token = uuid.uuid4().hex
        cutoff = time.monotonic() + max(0.0, budget - RECORD_MARGIN)
        future = self._click_writer().submit(
            inbox.new_row(click, received, self._ctx.click_hold(), token), cutoff,
            tuple(seen),
            orphan=lambda row_id: self._background.start(
                self._close_unused(inbox.Mark(row_id, token, received))))
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

    async def record_clicks(self, clicks: Sequence[Click], budget: float = RECORD_BUDGET
                            ) -> list[Recorded | None]:
        """``record_click`` for several clicks queued together, so they share one group
        commit (a batch decision's items); each answer is its click's, None when that
        one was not stored (the others may be)."""
        for click in clicks:
            inbox.check_size(click)
        received = self._ctx.now()
        cutoff = time.monotonic() + max(0.0, budget - RECORD_MARGIN)
        marks = [inbox.Mark(0, uuid.uuid4().hex, received) for _ in clicks]
        rows = [((inbox.new_row(click, received, self._ctx.click_hold(), mark.token), cutoff,
                  ()), self._orphan(mark)) for click, mark in zip(clicks, marks, strict=True)]
        futures = self._click_writer().submit_many(rows)
        try:
            async with asyncio.timeout(max(budget, 0.0)):
                ids = await asyncio.gather(*futures, return_exceptions=True)
        except TimeoutError:
            log.warning("batch clicks not recorded within their budget",
                        extra={"count": len(clicks), "budget_seconds": budget})
            return [None] * len(clicks)
        out: list[Recorded | None] = []
        for click, mark, row_id in zip(clicks, marks, ids, strict=True):
            if isinstance(row_id, BaseException) or row_id is None:
                if isinstance(row_id, BaseException):
                    log.error("recording a batch click failed", exc_info=row_id,
                              extra={"ref": click.ref[:64]})
                out.append(None)
                continue
            out.append(Recorded(click, dataclasses.replace(mark, id=row_id)))
        return out

    def _orphan(self, mark: inbox.Mark) -> Callable[[int], object]:
        return lambda row_id: self._background.start(
            self._close_unused(dataclasses.replace(mark, id=row_id)))

    def _click_writer(self) -> ClickWriter:
        if self._writer is None:  # one writer (one commit thread) per process
            self._writer = ClickWriter(self._ctx.db)
        return self._writer

    async def abandon_click(self, recorded: Recorded) -> None:
        """The clicker was already told their click was not recorded (their reply could
        not wait any longer): close the stored row unused, so nothing decides from it."""
        await self._close_unused(recorded.mark)

    async def _close_unused(self, mark: inbox.Mark) -> None:
        """Close a stored row nobody will decide: the clicker was told to click again
        (their wait ran out, ``record_click``'s ``orphan``) or was already answered."""
        now = self._ctx.now()
        await self._committer.batched(lambda s: inbox.close(
            s, mark, now, "failed", outcome="abandoned", message=NOT_RECORDED,
            was=("running",)))

    async def decide_click(self, recorded: Recorded, *, tell_later: bool = False
                           ) -> RespondResult:
        """Decide a click ``record_click`` stored; never raises.

        The stored row is closed in the decision's (or refusal's) own transaction. If
        deciding fails, the row is handed to the worker, which retries and tells the
        clicker; the answer then says so (outcome ``recorded``, message ``DEFERRED``).

        ``tell_later``: any outcome but ``accepted`` leaves the row ``telling``; the
        caller then tells the clicker (or knows they were told) and calls ``told``, or
        ``tell_failed`` to have the worker tell them (``TellsClickers``).
        """
        click, mark = recorded.click, recorded.mark
        if tell_later:
            mark = dataclasses.replace(mark, then_refused="telling")
        try:
            return await self._decide_click(click, mark)
        except inbox.ClickTakenOver:
            log.warning("a worker took the click over; it tells the clicker",
                        extra={"ref": click.ref[:64], "inbox_id": mark.id})
        except CardNotRecordedYet as exc:
            log.info("a click came from a card still being recorded; decided after a backoff",
                     extra={"ref": click.ref[:64], "inbox_id": mark.id})
            await self._release_click(mark, exc, 1)
        except Exception as exc:
            log.exception("deciding a stored click failed; the worker retries it",
                          extra={"ref": click.ref[:64], "inbox_id": mark.id})
            await self._release_click(mark, exc, 1)
        return RespondResult("recorded", DEFERRED)

    async def told(self, recorded: Recorded) -> None:
        """The clicker knows what became of a click decided with ``tell_later``: close
        its row (a batched write)."""
        now = self._ctx.now()
        await self._committer.batched(lambda s: inbox.close(
            s, recorded.mark, now, "done", was=("telling",)))

    async def tell_failed(self, recorded: Recorded, exc: BaseException) -> None:
        """Telling the clicker failed: the worker tells them after a backoff."""
        await self._release_click(recorded.mark, exc, 1, state="telling")

    async def _decide_click(self, click: Click, mark: inbox.Mark) -> RespondResult:
        with deciding_for(self._platforms.updates_cards_after_reply(click.platform)):
            return await self._decide_stored(click, mark)

    async def _decide_stored(self, click: Click, mark: inbox.Mark) -> RespondResult:
        if click.kind == "attach":
            return await self._attachments.attach(click.ref, click.responder, click.values,
                                                  mark)
        if is_batch_token(click.action_id):  # from a list, not a card: read it so
            return await self._decider.respond_stored(
                click.ref, click.responder, click.action_id, click.values, mark,
                read_batch_click, show=False)
        refused = await self._wrong_message(click, mark)
        if refused is not None:
            return refused
        if click.kind == "withdraw":  # bot.engine.withdraw
            return await self._withdrawals.withdraw(click.ref, click.responder, mark=mark)
        reader = self._platforms.click_reader(click.platform)
        return await self._decider.respond_stored(
            click.ref, click.responder, click.action_id, click.values, mark,
            reader.read_click if reader is not None else None, show=False)

    async def _wrong_message(self, click: Click, mark: inbox.Mark) -> RespondResult | None:
        """For adapters whose clicks name the message they came from
        (``clicks_name_their_message``, Feishu): refuse, audited and closing the row, a
        click from a message that is not a card of the request it claims (fail closed:
        an unknown message too). One indexed read; None when the click may go on."""
        message_id = click.reply_to.get("message")
        if not message_id or not self._platforms.clicks_name_their_message(click.platform):
            return None
        delivered, posting = await self._card_of(click, message_id)
        if delivered == click.ref:
            return None
        if delivered is None and posting:
            raise CardNotRecordedYet(click.ref)
        if delivered is None:
            text, check = UNKNOWN_MESSAGE, {"check": "unknown_message"}
        else:
            text, check = WRONG_MESSAGE, {"check": "ref_mismatch", "card_ref": delivered}
        details: dict[str, Any] = {"platform": click.platform, **check,
                                   "message_id": message_id[:200]}
        return await self._authorizer.refuse("rejected", text, click.ref, click.responder,
                                             "adapter_refused", details=details, mark=mark)

    async def _card_of(self, click: Click, message_id: str) -> tuple[str | None, bool]:
        """(ref of the request delivered as ``message_id``, or None; whether that
        request's card is still being posted, asked only when the message is unknown).
        A card's message is read once per process (``CardMessages``)."""
        known = self._messages.known(click.platform, message_id)
        if known is not None:
            return known[0], False
        return await self._committer.read(
            lambda s: _delivered(s, self._messages, click, message_id))

    async def _release_click(self, mark: inbox.Mark, exc: BaseException, attempts: int,
                             state: str = "running") -> None:
        """Give the row back for a retry with backoff (if that fails too, its lease runs
        out and a worker takes it anyway)."""
        tuning = self._ctx.tuning
        delay = worker.backoff(attempts, tuning.backoff_base, tuning.backoff_cap)
        error = str(exc) or type(exc).__name__
        try:
            await self._committer.tx(lambda s: inbox.release(s, mark, self._ctx.now(), delay, error,
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
            claimed = await self._committer.tx(lambda s: inbox.claim_next(
                s, self._ctx.now(), self._ctx.tuning.click_lease, self._ctx.db.is_postgres,
                self._ctx.claimant()))
            if claimed is None:
                break
            await self._recover(claimed)
            handled += 1
        return handled

    async def _recover(self, claimed: inbox.Claimed) -> None:
        click = claimed.click
        teller = self._platforms.teller(click.platform)
        mark = dataclasses.replace(claimed.mark, then="telling" if teller else "done")
        extra = {"ref": click.ref[:64], "inbox_id": mark.id, "attempt": claimed.attempts}
        outcome, message = claimed.outcome or "", claimed.message or verbatim("")
        if claimed.state != "telling":
            if claimed.attempts > self._ctx.tuning.click_max_attempts:
                outcome, message = "failed", GAVE_UP
                await self._committer.tx(lambda s: self._give_up_click(s, claimed, mark, teller))
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
                outcome, message = answer.outcome, answer.words
            log.info("stored click decided by the worker", extra={**extra, "outcome": outcome})
        if teller is not None:
            await self._tell(teller, claimed, mark, outcome, message)

    def _give_up_click(self, session: Session, claimed: inbox.Claimed, mark: inbox.Mark,
                       teller: TellsClickers | None) -> None:
        now = self._ctx.now()
        inbox.close(session, mark, now, "telling" if teller else "failed", outcome="failed",
                    message=GAVE_UP, was=("running",))
        store.audit(session, now, "click_failed", outcome="error", ref=claimed.click.ref[:64],
                    actor=claimed.click.responder, reason=str(GAVE_UP),
                    details={"inbox_id": mark.id, "attempts": claimed.attempts - 1})

    async def _tell(self, teller: TellsClickers, claimed: inbox.Claimed, mark: inbox.Mark,
                    outcome: str, message: Said) -> None:
        """Tell the clicker what became of their click, then close the row."""
        click = claimed.click
        try:
            await teller.tell_clicker(click.responder, click.reply_to, message)
        except Exception as exc:
            log.warning("telling a clicker failed", extra={
                "ref": click.ref[:64], "inbox_id": mark.id, "error": str(exc)[:500]})
            if claimed.attempts < self._ctx.tuning.click_max_attempts:
                await self._release_click(mark, exc, claimed.attempts, state="telling")
                return
        final = "failed" if outcome == "failed" else "done"
        await self._committer.tx(
            lambda s: inbox.close(s, mark, self._ctx.now(), final, was=("telling",)))

