"""Read-only questions about requests and queues (adapters, health checks, tests)."""

from __future__ import annotations

from functools import partial

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from bot.engine.committer import Committer
from bot.engine.context import Clock
from bot.engine.home import RUNS_SHOWN, runs_started_by
from bot.engine.ports import Identity
from bot.engine.request_cards import Cards
from bot.engine.store import OPEN
from renderers.card import RequestCard, RunLine
from storage import Delivery, HumanRequest, OutboxItem, ResumeJob

_RESUME_DUE = (select(ResumeJob.id).where(ResumeJob.state == "queued",
                                         ResumeJob.next_attempt_at <= bindparam("now"))
               .limit(1))


class Queries:
    """Lookups on snapshots: no write lock, nothing changed."""

    def __init__(self, committer: Committer, cards: Cards, now: Clock) -> None:
        self._committer = committer
        self._cards = cards
        self._now = now

    async def find_by_message(self, platform: str, message_id: str) -> str | None:
        """The ref of the request delivered as ``message_id`` on ``platform``."""

        def find(session: Session) -> str | None:
            query = (select(HumanRequest.ref).join(Delivery, Delivery.request_id == HumanRequest.id)
                     .where(Delivery.platform == platform, Delivery.message_id == message_id))
            return session.scalars(query).first()

        return await self._committer.read(find)

    async def card_for_message(
        self, platform: str, message_id: str
    ) -> tuple[str, RequestCard | None] | None:
        """``find_by_message`` and ``card`` in one snapshot read: the ref of the request
        delivered as ``message_id`` with its current card (None for an unknown message;
        the card is None only if the request vanished meanwhile)."""

        def find(session: Session) -> tuple[str, RequestCard | None] | None:
            query = (select(HumanRequest.ref).join(Delivery, Delivery.request_id == HumanRequest.id)
                     .where(Delivery.platform == platform, Delivery.message_id == message_id))
            ref = session.scalars(query).first()
            if ref is None:
                return None
            shown = self._cards.shown(session, ref)
            return ref, shown[1] if shown else None

        return await self._committer.read(find)

    async def not_open(self, refs: list[str]) -> list[str]:
        """Of ``refs``, those no longer open: decided, cancelled or timed out
        (``sqlite_watch`` wakes their long-polls)."""

        def find(session: Session) -> list[str]:
            found: list[str] = []
            for start in range(0, len(refs), 500):  # under SQLite's bound on parameters
                found += session.scalars(select(HumanRequest.ref).where(
                    HumanRequest.ref.in_(refs[start:start + 500]),
                    HumanRequest.status != OPEN))
            return found

        return await self._committer.read(find)

    async def resume_due(self) -> bool:
        """Whether a resume job is queued and due now (``sqlite_watch``, many times a
        second: one prebuilt Core statement, not an ORM query)."""
        now = self._now()
        return await self._committer.read(
            lambda session: session.connection().execute(
                _RESUME_DUE, {"now": now}).first() is not None)

    async def job_states(self) -> dict[str, int]:
        """Resume-queue counts by state (for health checks and tests)."""

        def count(session: Session) -> dict[str, int]:
            out: dict[str, int] = {}
            for state in session.scalars(select(ResumeJob.state)):
                out[state] = out.get(state, 0) + 1
            return out

        return await self._committer.read(count)

    async def outbox_states(self) -> dict[str, int]:
        """Outbox counts by state (for health checks and tests)."""

        def count(session: Session) -> dict[str, int]:
            out: dict[str, int] = {}
            for state in session.scalars(select(OutboxItem.state)):
                out[state] = out.get(state, 0) + 1
            return out

        return await self._committer.read(count)

    async def runs_started_by(self, identity: Identity, limit: int = RUNS_SHOWN
                              ) -> list[RunLine]:
        """The newest runs ``identity`` started (at most ``limit``), with their state."""
        return await self._committer.read(partial(
            runs_started_by, platform=identity.platform, user_id=identity.user_id,
            limit=max(1, limit)))
