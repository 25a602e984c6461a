"""Access: who may act on a request, checked before anything is written.

An approver of the request's route may answer; once a request is escalated, so may an
approver of the escalation route, judged only on the copies that route's own targets
received (so escalating into a big channel never widens the original route). Every
refusal is audited and leaves the request untouched.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.engine import authz, inbox, store
from bot.engine.base import EngineBase, log, targets_for
from bot.engine.cards import already_decided_message
from bot.engine.ports import Identity
from bot.engine.results import Outcome, RespondResult
from bot.settings import RouteSettings
from renderers.card import RequestCard
from storage import Delivery, HumanRequest, Run

NOT_FOUND = "This request does not exist (the link may be wrong or outdated)."

Copies = list[tuple[str, str]]
"""(target key ``"kind id"``, channel) of each delivered copy of a card on one platform."""
Staged = dict[str, list[Any]]
"""Files a person attached per field name, waiting for their submit."""


def copies_on(session: Session, request_id: int, platform: str) -> Copies:
    """Where the request's card went on ``platform`` (channel approvers count only there)."""
    rows = session.execute(
        select(Delivery.target_kind, Delivery.target_id, Delivery.channel)
        .where(Delivery.request_id == request_id, Delivery.platform == platform)
        .order_by(Delivery.id))
    return [(f"{kind} {target}", channel) for kind, target, channel in rows]


class AccessMixin(EngineBase):
    """Authorization of people acting on requests, and audited refusals."""

    async def _refuse(
        self, outcome: Outcome, message: str, ref: str, actor: Identity, event: str,
        card: RequestCard | None = None, run_id: str | None = None,
        details: dict[str, Any] | None = None, mark: inbox.Mark | None = None,
    ) -> RespondResult:
        """Audit a refused attempt (the request itself is left untouched).

        The audit row is group-committed with other refusals (``_batched``): a burst of
        late clicks costs a few commits, and each is answered once its row is stored.
        A stored click (``mark``) is closed in that same transaction.
        """
        now = self.now()

        def write(session: Session) -> None:
            store.audit(session, now, event, outcome="refused", run_id=run_id, ref=ref[:64],
                        actor=actor, reason=message, details=details)
            if mark is not None:
                inbox.finish(session, mark, now, outcome, message)

        await self._batched(write)
        log.info("attempt refused", extra={"ref": ref[:64], "event": event,
                                           "reason": message[:500]})
        return RespondResult(outcome, message, card)

    def _escalation_of(self, request: HumanRequest) -> RouteSettings | None:
        """The route ``request`` was escalated to (None before escalation)."""
        if request.escalated_at is None or not request.escalation_route:
            return None
        return self.settings.routes.get(request.escalation_route)

    async def _refusal(
        self, request: HumanRequest, route: RouteSettings, who: Identity, starter: Identity,
        copies: Copies,
    ) -> str | None:
        """None when ``who`` may act: an approver of ``route`` or, once the request was
        escalated, of the escalation route (with ``route``'s self-approval rule).

        ``channel_members`` of each route counts the chats that route's own targets got
        the card in, so escalating into a big channel never widens the original route.
        """
        directory = self._directory(who.platform)
        escalation = self._escalation_of(request)
        theirs = {f"{t.kind} {t.id}" for t in targets_for(escalation, who.platform)
                  } if escalation is not None else set()
        mine = {f"{t.kind} {t.id}" for t in targets_for(route, who.platform)}
        own = [channel for key, channel in copies if key in mine or key not in theirs]
        reason = await authz.refusal(route, who, starter, dict.fromkeys(own), directory)
        if reason is None or escalation is None:
            return reason
        extra = escalation.model_copy(update={"allow_self_approval": route.allow_self_approval})
        other = [channel for key, channel in copies if key in theirs]
        if await authz.refusal(extra, who, starter, dict.fromkeys(other), directory) is None:
            return None
        return reason

    async def _authorize(
        self, ref: str, who: Identity, event: str, mark: inbox.Mark | None = None
    ) -> tuple[HumanRequest, Run, RequestCard, Staged] | RespondResult:
        """Load the request and check the person may act on it (before any values)."""

        def load(session: Session) -> tuple[HumanRequest, Run, RequestCard, Copies,
                                             Staged] | None:
            loaded = self._load(session, ref)
            if loaded is None:
                return None
            request = loaded[0]
            channels = copies_on(session, request.id, who.platform)
            staged = store.staged_files(session, request.id, who)
            return (*loaded, channels, staged)

        found = await self._read(load)  # no write lock: most late clicks end right here
        if found is None:
            return await self._refuse("not_found", NOT_FOUND, ref, who, f"{event}_unknown_ref",
                                      mark=mark)
        request, run, card, channels, staged = found
        if request.status != store.OPEN:
            return await self._refuse("already_decided", already_decided_message(request), ref,
                                      who, f"{event}_already_decided", card, run.id, mark=mark)
        route = self.settings.routes.get(request.route)
        reason: str | None
        if route is None:
            reason = "This request's route is no longer configured; ask an admin."
        else:
            reason = await self._refusal(request, route, who, store.starter(run), channels)
        if reason is not None:
            return await self._refuse("rejected", reason, ref, who, f"{event}_unauthorized",
                                      card, run.id, mark=mark)
        return request, run, card, staged

    async def pending_for(self, identity: Identity) -> list[RequestCard]:
        """Open requests ``identity`` may answer (oldest first)."""

        def load(session: Session) -> list[tuple[HumanRequest, Run, RequestCard, Copies]]:
            rows = session.scalars(select(HumanRequest).where(HumanRequest.status == store.OPEN)
                                   .order_by(HumanRequest.id).limit(200)).all()
            out = []
            for request in rows:
                loaded = self._load(session, request.ref)
                if loaded is not None:
                    channels = copies_on(session, request.id, identity.platform)
                    out.append((*loaded, channels))
            return out

        cards = []
        for request, run, card, channels in await self._read(load):
            route = self.settings.routes.get(request.route)
            if route is not None and await self._refusal(
                request, route, identity, store.starter(run), channels) is None:
                cards.append(card)
        return cards
