"""``Cards``: a request as people should see it now, and queuing its card updates.

Every part of the engine that shows or re-renders a request goes through here, so the
frozen policy's progress line ("1 of 2 approvals"), the route's locale and time zone
are applied in one place.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from bot.engine import card_rows, outbox, policy, store
from bot.engine.card_rows import CardRow
from bot.engine.cards import build_card, localized
from bot.engine.committer import Committer
from bot.engine.context import EngineContext
from renderers.card import RequestCard
from storage import HumanRequest, Run

Loaded = tuple[HumanRequest, Run, RequestCard]
"""A request, its run, and its card as people should see it now."""


class Cards:
    """Load requests with their current card; queue re-rendering their copies."""

    def __init__(self, ctx: EngineContext, committer: Committer) -> None:
        self._ctx = ctx
        self._committer = committer

    def load(self, session: Session, ref: str) -> Loaded | None:
        """The request behind ``ref`` with its run and current card (None if unknown)."""
        found = store.request_with_run(session, ref)
        if found is None:
            return None
        request, run, votes = found
        return request, run, self._card(session, request, run.agent, votes)

    def shown(self, session: Session, ref: str) -> tuple[CardRow, RequestCard] | None:
        """The request behind ``ref`` as plain columns with its current card, for
        callers that only read (access checks, card updates, reminders): no ORM objects
        are built."""
        row = card_rows.card_row(session, ref)
        return None if row is None else (row, self._card(session, row, row.agent, row.votes))

    def _card(self, session: Session, request: HumanRequest | CardRow, agent: str,
              votes: int) -> RequestCard:
        card = build_card(request, agent, votes)
        rules = policy.of(request, self._ctx.settings)
        card = policy.with_progress(session, request, card, rules)
        return localized(card, rules.route if rules else None)

    async def card(self, ref: str) -> RequestCard | None:
        """The request as it should be shown now, or None for an unknown ref."""
        loaded = await self._committer.read(lambda s: self.load(s, ref))
        return loaded[2] if loaded else None

    def enqueue_update(self, session: Session, request: HumanRequest,
                       version: int | None = None) -> None:
        """Queue re-rendering every delivered copy of ``request``'s card (at ``version``:
        by default the one the row holds now)."""
        outbox.enqueue(session, self._ctx.now(), self._ctx.outbox_hold(), "update_card",
                       request_id=request.id, run_id=request.run_id,
                       payload={"ref": request.ref,
                                "version": request.version if version is None else version})
