"""Batches: "Approve selected" / "Reject selected" from a pending list.

Each selected request is decided as if it had been clicked alone on its card: one
click per item is stored in the click inbox before the platform is told anything
(``record``: all of them queued together, so one group commit stores the batch), then
each stored click is decided by the ``Decider`` exactly as a card click is
(``decide``): authorization, the deadline, required reasons (the batch's one reason
applies to every item), quorum and veto, binding, and the card update through the
outbox, per item. Items are decided concurrently, so the decisions share group
commits too. A batch racing single clicks on the same requests still decides each
request once: every item goes through the same row lock and compare-and-set.

The answer (``BatchResult.words``) tells the clicker what happened to every item, in
their language ("Approved 4. Not recorded: “Deploy” (needs a reason), …"); one
``batch_decided`` audit row sums the batch up (each item has its own audit rows too).
Which requests a list may offer is ``renderers.batch``'s rule.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.engine import store
from bot.engine.batch_reader import REASON
from bot.engine.clicks import DEFERRED, NOT_RECORDED, RECORD_BUDGET, ClickInbox
from bot.engine.committer import Committer, log
from bot.engine.context import EngineContext
from bot.engine.inbox import Click, Recorded
from bot.engine.ports import Identity
from bot.engine.results import RespondResult
from renderers.batch import MAX_ITEMS, VERBS
from renderers.card import MAX_REF_CHARS
from renderers.markdown import plain
from renderers.words import Said, joined, said
from storage import HumanRequest

MAX_REASON_CHARS = 3000
TITLE_CHARS = 60
"""Characters of a request's title shown in the answer."""


@dataclasses.dataclass(frozen=True)
class StoredBatch:
    """A batch whose clicks are stored (or not): what ``Batches.decide`` decides."""

    who: Identity
    verb: str
    recorded: tuple[Recorded, ...]
    not_stored: tuple[str, ...]
    """Refs whose click the database did not take in time (nothing decided from them)."""
    dropped: int = 0
    """Refs past ``MAX_ITEMS`` in the payload: not stored, not decided."""

    @property
    def stored_any(self) -> bool:
        return bool(self.recorded)


@dataclasses.dataclass(frozen=True)
class BatchItem:
    """What became of one selected request."""

    ref: str
    title: str
    """The request's title (model-written: plain text, escaped by each renderer)."""
    result: RespondResult


@dataclasses.dataclass(frozen=True)
class BatchResult:
    verb: str
    items: tuple[BatchItem, ...]
    dropped: int = 0

    @property
    def decided(self) -> list[BatchItem]:
        return [i for i in self.items if i.result.outcome == "accepted"]

    @property
    def voted(self) -> list[BatchItem]:
        return [i for i in self.items
                if i.result.outcome == "recorded" and i.result.words != DEFERRED]

    @property
    def deferred(self) -> list[BatchItem]:
        return [i for i in self.items
                if i.result.outcome == "recorded" and i.result.words == DEFERRED]

    @property
    def refused(self) -> list[BatchItem]:
        return [i for i in self.items if i.result.outcome not in ("accepted", "recorded")]

    @property
    def words(self) -> Said:
        """The whole answer, e.g. "Approved 4. Not recorded: “Deploy” (needs a reason)."."""
        parts = [said("batch.approved" if self.verb == "approve" else "batch.rejected",
                       count=len(self.decided))]
        if self.voted:
            parts.append(said("batch.voted", count=len(self.voted),
                              items=_items(self.voted, why=False)))
        if self.deferred:
            parts.append(said("batch.deferred", count=len(self.deferred),
                              items=_items(self.deferred, why=False)))
        if self.refused:
            parts.append(said("batch.not_recorded", items=_items(self.refused, why=True)))
        if self.dropped:
            parts.append(said("batch.too_many", count=self.dropped, most=MAX_ITEMS))
        return joined(parts, "batch.then")


def _items(items: Sequence[BatchItem], *, why: bool) -> Said:
    return joined((said("batch.item", title=i.title, why=_why(i.result.words)) if why
                   else said("batch.item_bare", title=i.title) for i in items), "batch.and")


def _why(words: Said) -> Said:
    """The short reason for the list; the item's own words when there is none."""
    if words.key == "refused.reason_needed":
        return said("batch.why_reason")
    return words


class Batches:
    """Record a batch before the ack, then decide each item as a lone click."""

    def __init__(self, ctx: EngineContext, committer: Committer, clicks: ClickInbox) -> None:
        self._ctx = ctx
        self._committer = committer
        self._clicks = clicks

    async def record(self, who: Identity, verb: str, refs: Sequence[str],
                     reason: str | None = None, reply_to: Mapping[str, str] | None = None,
                     budget: float = RECORD_BUDGET) -> StoredBatch:
        """Store one click per selected request (at most ``MAX_ITEMS``; repeats and
        malformed refs dropped) within ``budget`` seconds. ``verb``: approve | reject."""
        token = VERBS[verb]
        wanted = list(dict.fromkeys(r for r in refs if isinstance(r, str)
                                    and 0 < len(r) <= MAX_REF_CHARS))
        chosen, dropped = wanted[:MAX_ITEMS], max(0, len(wanted) - MAX_ITEMS)
        text = (reason or "").strip()[:MAX_REASON_CHARS]
        values = {REASON: text} if text else {}
        clicks = [Click(who.platform, ref, who, token, values, reply_to=dict(reply_to or {}))
                  for ref in chosen]
        stored = await self._clicks.record_clicks(clicks, budget) if clicks else []
        recorded = tuple(r for r in stored if r is not None)
        missing = tuple(c.ref for c, r in zip(clicks, stored, strict=True) if r is None)
        return StoredBatch(who, verb, recorded, missing, dropped)

    async def decide(self, batch: StoredBatch) -> BatchResult:
        """Decide every stored item (concurrently, each as a lone click); never raises."""
        results = await asyncio.gather(*(self._clicks.decide_click(r) for r in batch.recorded))
        outcomes: dict[str, RespondResult] = {
            r.click.ref: result for r, result in zip(batch.recorded, results, strict=True)}
        for ref in batch.not_stored:
            outcomes[ref] = RespondResult("rejected", NOT_RECORDED)
        titles = await self._committer.read(lambda s: _titles(s, list(outcomes)))
        result = BatchResult(batch.verb, tuple(
            BatchItem(ref, titles.get(ref, ref), outcome) for ref, outcome in outcomes.items()),
            batch.dropped)
        await self._audit(batch.who, result)
        return result

    async def _audit(self, who: Identity, result: BatchResult) -> None:
        details = {"verb": result.verb,
                   "decided": [i.ref for i in result.decided],
                   "voted": [i.ref for i in result.voted],
                   "deferred": [i.ref for i in result.deferred],
                   "refused": {i.ref: i.result.words.key for i in result.refused},
                   "dropped": result.dropped}
        try:
            await self._committer.batched(lambda s: store.audit(
                s, self._ctx.now(), "batch_decided", actor=who,
                reason=str(result.words)[:2000], details=details))
        except Exception:
            log.exception("could not audit a batch decision (each item is audited)")


def _titles(session: Session, refs: list[str]) -> dict[str, str]:
    if not refs:
        return {}
    out = {}
    for ref, args in session.execute(select(HumanRequest.ref, HumanRequest.args)
                                     .where(HumanRequest.ref.in_(refs))):
        args = args or {}
        subject = str(args.get("title") or args.get("question") or ref)
        out[ref] = plain(" ".join(subject.split()), TITLE_CHARS)
    return out
