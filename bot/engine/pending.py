"""Pending: the open requests one person may answer, complete and paginated.

The database narrows the candidates first: open requests on a route that has approvers
on the person's platform, or escalated to such a route. Every candidate is then
authorized exactly as a click would be (``Authorizer.refusal``: approver lists,
groups, channel members, self-approval), in batches by id, so however many requests
other routes have open, nobody is told "nothing is waiting" while something is. Only
the cards of the page shown are rendered.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from bot.engine import authz, delegation, policy, store
from bot.engine.access import Authorizer, Copies
from bot.engine.cards import build_card
from bot.engine.committer import Committer
from bot.engine.context import EngineContext
from bot.engine.ports import Identity
from bot.engine.results import PendingPage
from bot.settings import RouteSettings
from renderers.card import RequestCard
from storage import Delivery, HumanRequest, Run

BATCH = 200
"""Candidates read (and authorized) per database round trip."""
PER_PAGE = 10

Candidate = tuple[HumanRequest, Run, Copies]


def visible_routes(routes: Mapping[str, RouteSettings], platform: str) -> list[str]:
    """Names of routes whose approvers can include someone on ``platform``."""
    return [name for name, route in routes.items() if route.approvers_for(platform) is not None]


def candidates(
    session: Session, platform: str, routes: list[str], after_id: int, limit: int
) -> list[Candidate]:
    """Open requests after ``after_id`` on (or escalated to) ``routes``, with the copies
    each has on ``platform`` (channel approvers count only there): three queries."""
    visible = or_(HumanRequest.route.in_(routes),  # escalated: any step's route may match
                  HumanRequest.escalated_at.is_not(None))
    rows = session.execute(
        select(HumanRequest, Run).join(Run, Run.id == HumanRequest.run_id)
        .where(HumanRequest.status == store.OPEN, HumanRequest.id > after_id, visible)
        .order_by(HumanRequest.id).limit(limit)).all()
    copies: dict[int, Copies] = {}
    if rows:
        found = session.execute(
            select(Delivery.request_id, Delivery.target_kind, Delivery.target_id,
                   Delivery.channel)
            .where(Delivery.request_id.in_([request.id for request, _ in rows]),
                   Delivery.platform == platform)
            .order_by(Delivery.id))
        for request_id, kind, target, channel in found:
            copies.setdefault(request_id, []).append((f"{kind} {target}", channel))
    return [(request, run, copies.get(request.id, [])) for request, run in rows]


class Pending:
    """``page`` / ``all_for``: what is waiting for one person."""

    def __init__(self, ctx: EngineContext, committer: Committer,
                 authorizer: Authorizer) -> None:
        self._ctx = ctx
        self._committer = committer
        self._authorizer = authorizer

    async def page(
        self, identity: Identity, page: int = 1, per_page: int = PER_PAGE
    ) -> PendingPage:
        """Page ``page`` (1-based, clamped) of the open requests ``identity`` may answer,
        oldest first, with how many there are in all."""
        allowed = await self._answerable(identity)
        per_page = max(1, per_page)
        pages = max(1, -(-len(allowed) // per_page))
        page = min(max(1, page), pages)
        shown = allowed[(page - 1) * per_page: page * per_page]
        cards = await self._committer.read(lambda s: _cards(s, shown))
        routes = {request.ref: request.escalation_route or request.route
                  for request, _ in shown}
        return PendingPage(cards, len(allowed), page, per_page, routes)

    async def all_for(self, identity: Identity) -> list[RequestCard]:
        """Every open request ``identity`` may answer (oldest first)."""
        allowed = await self._answerable(identity)
        return await self._committer.read(lambda s: _cards(s, allowed))

    async def _answerable(self, identity: Identity) -> list[tuple[HumanRequest, Run]]:
        """All open requests ``identity`` may answer, authorized like a click."""
        routes = visible_routes(self._ctx.settings.routes, identity.platform)
        allowed: list[tuple[HumanRequest, Run]] = []
        after = 0
        now = self._ctx.now()
        grants = [g for g in await self._committer.read(
                      lambda s: delegation.to_delegate(s, now, identity))
                  if g.state == "active"]  # out of office: requests they answer for others
        while routes:
            batch = await self._committer.read(partial(candidates, platform=identity.platform,
                                                       routes=routes, after_id=after, limit=BATCH))
            for request, run, copies in batch:
                rules = policy.of(request, self._ctx.settings)  # frozen rules
                if rules is None:
                    continue
                starter = store.starter(run)
                if await self._may_answer(rules, request, run, identity, copies) or isinstance(
                        await self._authorizer.delegated_by(request, starter, rules.route,
                                                            identity, copies, grants), Identity):
                    allowed.append((request, run))
            if len(batch) < BATCH:
                break
            after = batch[-1][0].id
        return allowed

    async def _may_answer(self, rules: policy.Policy, request: HumanRequest, run: Run,
                          identity: Identity, copies: Copies) -> bool:
        """Authorized like a click: an approver, or a member of a sign-off group."""
        refusal = await self._authorizer.refusal(request, rules.route, identity, store.starter(run),
                                                 copies)
        if refusal == authz.NOT_ALLOWED:
            return bool(await self._authorizer.signer(rules, identity))
        return refusal is None


def _cards(session: Session, shown: list[tuple[HumanRequest, Run]]) -> list[RequestCard]:
    return [build_card(request, run.agent, store.vote_count(session, request.id))
            for request, run in shown]
