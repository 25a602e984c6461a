"""The pre-check of a click, before it is stored: refuse at once what is known cheaply.

A platform whose acknowledgement can carry words (a Feishu toast) asks this first, so
the person learns *where they clicked* that their click did nothing, and why: an
unknown or tampered card, action or option, a request already closed or past its
deadline, someone who is not an approver by the request's frozen policy, a requester
approving their own run, a missing required field or reason. Each refusal is audited
exactly as the decision path audits it (same events), in one group-committed
transaction with the callback's dedupe keys.

It only *refuses* on what it knows for sure; everything else goes on to be stored and
decided as before (``ClickInbox``), which re-checks all of it under the row lock:

- one snapshot read (no write lock), shared by the concurrent clicks on one card;
- membership from the directory's fresh cache only (``Platforms.cached_directory``):
  a person the cache cannot vouch for either way is judged later, never refused here,
  and the pre-check never waits for the platform;
- a request seen open may be closed by the time the click is decided: the decision
  says so then (a request seen closed stays closed, so that refusal is final).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy.orm import Session

from bot.engine import authz, housekeeping, policy, store
from bot.engine.access import FILE_TYPES, Authorizer, Copies, Staged, copies_on
from bot.engine.card_messages import CardMessages
from bot.engine.card_rows import CardRow
from bot.engine.cards import already_decided_message, as_utc
from bot.engine.clicks import UNKNOWN_MESSAGE, WRONG_MESSAGE
from bot.engine.committer import Committer, log
from bot.engine.context import EngineContext
from bot.engine.decisions import reason_needed
from bot.engine.edits import take_edit
from bot.engine.inbox import AlreadySeen, Click
from bot.engine.platforms import Platforms
from bot.engine.ports import Identity
from bot.engine.request_cards import Cards
from bot.engine.results import NOT_FOUND, Outcome, RespondResult
from bot.engine.values import InvalidValues, check_answer
from renderers.card import RequestCard
from renderers.i18n import normalize
from renderers.words import Said, said


@dataclass(frozen=True)
class Checked:
    """The pre-check's verdict: ``refusal`` (audited; the click is not stored), or None
    to store and decide the click as usual."""

    refusal: RespondResult | None
    locale: str | None = None
    """The card's locale, when the request was found: the words to answer in."""
    direct: bool | None = None
    """True when the clicked card was sent to one person (their chat with the bot),
    False when it went to a chat; None when unknown."""


@dataclass(frozen=True)
class _Snapshot:
    """One read shared by the clicks on one card: the request, and where the clicked
    message was delivered."""

    loaded: tuple[CardRow, RequestCard] | None
    delivered: tuple[str, str] | None
    """(ref, target kind) of the delivery behind the clicked message."""
    posting: bool = False
    """The message is unknown but the request's card is still being posted
    (``store.card_being_posted``): the click is stored and decided later, not refused."""


@dataclass(frozen=True)
class _Refusal:
    outcome: Outcome
    words: Said
    event: str
    details: dict[str, Any]


class ClickCheck:
    """``check``: refuse a click at once when the answer is known cheaply."""

    def __init__(self, ctx: EngineContext, committer: Committer, authorizer: Authorizer,
                 cards: Cards, platforms: Platforms, messages: CardMessages) -> None:
        self._ctx = ctx
        self._committer = committer
        self._authorizer = authorizer
        self._cards = cards
        self._platforms = platforms
        self._messages = messages
        self._reading: dict[tuple[str, str, str], asyncio.Future[_Snapshot]] = {}
        self._queued: list[tuple[str, str, str]] = []
        self._batching = False
        self._batcher: asyncio.Future[None] | None = None

    async def check(self, click: Click, seen: Sequence[str] = ()) -> Checked:
        """Refuse ``click`` now (audited, with ``seen``: the callback's dedupe keys, in
        one transaction; ``AlreadySeen`` when one was recorded before) or let it go on.
        Only button answers are checked; withdrawals and files go on."""
        if click.kind != "respond":
            return Checked(None)
        snapshot = await self._snapshot(click)
        locale = normalize(snapshot.loaded[1].locale) if snapshot.loaded else None
        direct = snapshot.delivered[1] == "user" if snapshot.delivered else None
        refusal = await self._judge(click, snapshot)
        if refusal is None:
            return Checked(None, locale, direct)
        run_id = snapshot.loaded[0].run_id if snapshot.loaded else None
        await self._audit(click, refusal, run_id, seen)
        log.info("click refused before it was stored", extra={
            "ref": click.ref[:64], "event": refusal.event, "reason": str(refusal.words)[:500]})
        return Checked(RespondResult(refusal.outcome, refusal.words), locale, direct)

    async def _snapshot(self, click: Click) -> _Snapshot:
        """Concurrent clicks share reads: one per card, and the cards asked for while a
        read runs are read together in the next one (a burst costs a few snapshot
        reads, not one each). A request read open may be closed by the time a click is
        decided: the decision re-checks."""
        message = click.reply_to.get("message", "") \
            if self._platforms.clicks_name_their_message(click.platform) else ""
        key = (click.platform, click.ref, message)
        pending = self._reading.get(key)
        if pending is None:
            pending = self._reading[key] = asyncio.get_running_loop().create_future()
            self._queued.append(key)
            if not self._batching:
                self._batching = True
                self._batcher = asyncio.ensure_future(self._read_batches())
        return await asyncio.shield(pending)

    async def _read_batches(self) -> None:
        try:
            while self._queued:
                keys, self._queued = self._queued, []
                try:
                    snapshots = await self._committer.read(partial(self._read_all, keys),
                                                           aside=True)
                except Exception as exc:
                    for key in keys:
                        self._settle(key, exc)
                    continue
                for key, snapshot in zip(keys, snapshots, strict=True):
                    self._settle(key, snapshot)
        finally:
            self._batching = False

    def _settle(self, key: tuple[str, str, str], outcome: _Snapshot | Exception) -> None:
        future = self._reading.pop(key, None)
        if future is None or future.done():
            return
        if isinstance(outcome, Exception):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    def _read_all(self, keys: list[tuple[str, str, str]], session: Session
                  ) -> list[_Snapshot]:
        return [self._read(session, *key) for key in keys]

    def _read(self, session: Session, platform: str, ref: str, message: str) -> _Snapshot:
        delivered = self._messages.read(session, platform, message) if message else None
        posting = bool(message) and delivered is None and store.card_being_posted(session, ref)
        return _Snapshot(self._cards.shown(session, ref), delivered, posting)

    async def _judge(self, click: Click, snapshot: _Snapshot) -> _Refusal | None:
        message = click.reply_to.get("message", "")
        named = message and self._platforms.clicks_name_their_message(click.platform)
        # An unknown message while the card is still being posted is not refused here:
        # the click is stored, and decided once the card's delivery is recorded.
        unknown = snapshot.delivered is None and not snapshot.posting
        if named and (unknown or (snapshot.delivered and snapshot.delivered[0] != click.ref)):
            if snapshot.delivered is None:
                words, check = UNKNOWN_MESSAGE, {"check": "unknown_message"}
            else:
                words = WRONG_MESSAGE
                check = {"check": "ref_mismatch", "card_ref": snapshot.delivered[0]}
            return _Refusal("rejected", words, "adapter_refused",
                            {**check, "message_id": message[:200]})
        if snapshot.loaded is None:
            return _Refusal("not_found", NOT_FOUND, "respond_unknown_ref", {})
        request, card = snapshot.loaded
        who = click.responder
        if request.status != store.OPEN:
            return _Refusal("already_decided", already_decided_message(request, who.platform),
                            "respond_already_decided", {})
        if request.deadline is not None and self._ctx.now() >= request.deadline:
            when = f"{as_utc(request.deadline):%Y-%m-%d %H:%M UTC}"
            return _Refusal("already_decided", said("closed.timed_out_at", when=when),
                            "respond_too_late", {})
        copies, staged = await self._who_reads(request, card, who)
        judged = await self._authorizer.judge(request, store.starter(request), who, copies,
                                              cached=True)
        if not isinstance(judged, Identity):
            if judged == authz.UNVERIFIED:
                return None  # the cache cannot tell: the full check decides
            return _Refusal("rejected", judged, "respond_unauthorized", {})
        return self._values(click, request, card, staged)

    async def _who_reads(self, request: CardRow, card: RequestCard,
                         who: Identity) -> tuple[Copies, Staged]:
        """The clicker's own part of the read, only when it matters (rarely)."""
        channels = self._authorizer.counts_channels(request, who.platform)
        files = any(f.type in FILE_TYPES for f in card.args.fields)
        if not channels and not files:
            return [], {}
        return await self._committer.read(lambda s: (
            copies_on(s, request.id, who.platform) if channels else [],
            store.staged_files(s, request.id, who) if files else {}))

    def _values(self, click: Click, request: CardRow, card: RequestCard,
                staged: Staged) -> _Refusal | None:
        """The answer as the decision will read it: action, options, required fields,
        the required reason."""
        action_id, values = click.action_id, dict(click.values)
        details: dict[str, Any] = {"action_id": action_id[:200]}
        reader = self._platforms.click_reader(click.platform)
        try:
            if reader is not None:
                action_id, values = reader.read_click(card, action_id, values)
            merged: dict[str, Any] = dict(values)
            for name, files in staged.items():
                if not merged.get(name):
                    merged[name] = files
            merged, _edit = take_edit(card, action_id, merged)
            action, clean = check_answer(card.args, action_id, merged)
        except InvalidValues as exc:
            return _Refusal("rejected", exc.words, "respond_invalid", details)
        except ValueError as exc:
            return _Refusal("rejected", said("refused.unreadable", reason=str(exc)),
                            "respond_invalid", details)
        rules = policy.of(request, self._ctx.settings)
        if policy.reason_missing(rules, action.id, clean):
            return _Refusal("rejected", reason_needed(card, rules, action.label),
                            "respond_reason_missing", {"action_id": action.id})
        return None

    async def _audit(self, click: Click, refusal: _Refusal, run_id: str | None,
                     seen: Sequence[str]) -> None:
        """The refusal's audit row, with the callback's dedupe keys, in one batched
        transaction; ``AlreadySeen`` (nothing audited) when a key was recorded before."""
        now = self._ctx.now()
        keys = list(seen)
        details = {"platform": click.platform, "checked": "before_ack", **refusal.details}

        def write(session: Session) -> str | None:
            for key in keys:
                if not housekeeping.mark_seen(session, now, click.platform, key):
                    return key
            store.audit(session, now, refusal.event, outcome="refused", run_id=run_id,
                        ref=click.ref[:64], actor=click.responder,
                        reason=str(refusal.words), details=details)
            return None

        repeated = await self._committer.batched(write)
        if repeated is not None:
            raise AlreadySeen(repeated)
