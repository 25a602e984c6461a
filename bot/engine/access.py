"""Access: who may act on a request, checked before anything is written.

An approver of the request's route may answer; once a request is escalated, so may an
approver of every escalation route reached so far, each judged only on the copies that
route's own targets received (so escalating into a big channel never widens the original
route). Every
refusal is audited and leaves the request untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from bot.engine import authz, delegation, inbox, policy, store, waiting
from bot.engine.card_rows import CardRow
from bot.engine.cards import already_decided_message
from bot.engine.committer import Committer, log
from bot.engine.context import EngineContext
from bot.engine.platforms import Platforms
from bot.engine.ports import Directory, DirectoryUnavailable, Identity
from bot.engine.request_cards import Cards
from bot.engine.results import NOT_FOUND, Outcome, RespondResult
from bot.engine.targets import targets_for
from bot.settings import RouteSettings
from renderers.card import RequestCard
from renderers.words import Said, said
from storage import Delivery, HumanRequest

Judged = HumanRequest | CardRow
"""A request as access checks read it: an ORM object, or the Core row of a click."""
Copies = list[tuple[str, str]]
"""(target key ``"kind id"``, channel) of each delivered copy of a card on one platform."""
Staged = dict[str, list[Any]]
"""Files a person attached per field name, waiting for their submit."""
FILE_TYPES = ("file", "file-list")
"""Field types a person attaches files to (only these can have staged files)."""


_COPIES = (select(Delivery.target_kind, Delivery.target_id, Delivery.channel)
           .where(Delivery.request_id == bindparam("request_id"),
                  Delivery.platform == bindparam("platform"))
           .order_by(Delivery.id))
"""Built once: every click on a channel-approver card reads its copies (building the
statement each time cost about as much as running it)."""


def copies_on(session: Session, request_id: int, platform: str) -> Copies:
    """Where the request's card went on ``platform`` (channel approvers count only there)."""
    rows = session.execute(_COPIES, {"request_id": request_id, "platform": platform})
    return [(f"{kind} {target}", channel) for kind, target, channel in rows]


@dataclass(frozen=True)
class Allowed:
    """A person may act on a pending request: what was read to decide it."""

    request: CardRow
    """The request as read for the check (a lookup: the decision reads it again, locked)."""
    card: RequestCard
    staged: Staged
    """Files this person attached and has not submitted yet."""
    acting: Identity
    """Who they act as: themselves, or the person who delegated to them ("Bob for
    Alice", ``bot.engine.delegation``)."""


class Authorizer:
    """Who may act on a request (approvers, escalation, sign-off, delegation), and
    audited refusals. A refusal leaves the request untouched."""

    def __init__(self, ctx: EngineContext, committer: Committer, cards: Cards,
                 platforms: Platforms) -> None:
        self._ctx = ctx
        self._committer = committer
        self._cards = cards
        self._platforms = platforms

    def directory(self, platform: str) -> Directory | None:
        """The membership lookups of ``platform`` (None: no directory there)."""
        return self._platforms.directory(platform)

    async def refuse(
        self, outcome: Outcome, words: Said, ref: str, actor: Identity, event: str,
        card: RequestCard | None = None, run_id: str | None = None,
        details: dict[str, Any] | None = None, mark: inbox.Mark | None = None,
    ) -> RespondResult:
        """Audit a refused attempt (the request itself is left untouched).

        The audit row is group-committed with other refusals (the committer's
        ``batched``): a burst of late clicks costs a few commits, and each is answered
        once its row is stored.
        A stored click (``mark``) is closed in that same transaction.
        """
        now = self._ctx.now()
        message = str(words)  # audits and logs are for admins: English

        def write(session: Session) -> None:
            store.audit(session, now, event, outcome="refused", run_id=run_id, ref=ref[:64],
                        actor=actor, reason=message, details=details)
            if mark is not None:
                inbox.finish(session, mark, now, outcome, words)

        await self._committer.batched(write)
        log.info("attempt refused", extra={"ref": ref[:64], "event": event,
                                           "reason": message[:500]})
        return RespondResult(outcome, words, card)

    def _escalations_of(self, request: Judged) -> list[RouteSettings]:
        """The routes ``request`` was escalated to, every reached step (none before), as
        frozen with the request's policy."""
        rules = policy.of(request, self._ctx.settings)
        settings = self._ctx.settings
        found = (rules.route_named(name, settings) if rules is not None
                 else settings.routes.get(name) for name in waiting.reached_routes(request))
        return [route for route in found if route is not None]

    def counts_channels(self, request: Judged, platform: str) -> bool:
        """Whether judging a click on ``platform`` needs the card's delivered copies:
        only when the route, or an escalation route reached so far, lets the members
        of the channels it went to answer (``approvers.channel_members``)."""
        rules = policy.of(request, self._ctx.settings)
        routes = [rules.route] if rules is not None else []
        for route in [*routes, *self._escalations_of(request)]:
            approvers = route.approvers_for(platform)
            if approvers is not None and approvers.channel_members:
                return True
        return False

    async def refusal(
        self, request: Judged, route: RouteSettings, who: Identity, starter: Identity,
        copies: Copies, *, cached: bool = False,
    ) -> Said | None:
        """None when ``who`` may act: an approver of ``route`` or, once the request was
        escalated, of any reached escalation route (with ``route``'s self-approval rule).

        ``channel_members`` of each route counts the chats that route's own targets got
        the card in, so escalating into a big channel never widens the original route.
        ``cached``: judge from the directory's fresh cache only (``UNVERIFIED`` when
        that is not enough; a pre-check then lets the full check decide).
        """
        directory = (self._platforms.cached_directory(who.platform) if cached
                     else self._platforms.directory(who.platform))
        steps = self._escalations_of(request)
        keyed = [{f"{t.kind} {t.id}" for t in targets_for(step, who.platform)}
                 for step in steps]
        theirs = set().union(*keyed) if keyed else set()
        mine = {f"{t.kind} {t.id}" for t in targets_for(route, who.platform)}
        own = [channel for key, channel in copies if key in mine or key not in theirs]
        reason = await authz.refusal(route, who, starter, dict.fromkeys(own), directory)
        if reason is None or not steps:
            return reason
        for step, keys in zip(steps, keyed, strict=True):
            extra = step.model_copy(update={"allow_self_approval": route.allow_self_approval})
            other = [channel for key, channel in copies if key in keys]
            if await authz.refusal(extra, who, starter, dict.fromkeys(other),
                                   directory) is None:
                return None
        return reason

    async def authorize(
        self, ref: str, who: Identity, event: str, mark: inbox.Mark | None = None
    ) -> Allowed | RespondResult:
        """Load the request and check the person may act on it (before any values);
        a refusal comes back as the (audited) answer to give."""

        def load(session: Session) -> tuple[CardRow, RequestCard, Copies, Staged] | None:
            shown = self._cards.shown(session, ref)  # Core rows: nothing is changed here
            if shown is None:
                return None
            request, card = shown
            channels = (copies_on(session, request.id, who.platform)
                        if self.counts_channels(request, who.platform) else [])
            staged = (store.staged_files(session, request.id, who)
                      if any(f.type in FILE_TYPES for f in card.args.fields) else {})
            return request, card, channels, staged

        found = await self._committer.read(load)  # no write lock: most late clicks end right here
        if found is None:
            return await self.refuse("not_found", NOT_FOUND, ref, who, f"{event}_unknown_ref",
                                     mark=mark)
        request, card, channels, staged = found
        if request.status != store.OPEN:
            return await self.refuse("already_decided",
                                     already_decided_message(request, who.platform), ref,
                                     who, f"{event}_already_decided", card, request.run_id,
                                     mark=mark)
        judged = await self.judge(request, store.starter(request), who, channels)
        if not isinstance(judged, Identity):
            return await self.refuse("rejected", judged, ref, who, f"{event}_unauthorized",
                                     card, request.run_id, mark=mark)
        return Allowed(request, card, staged, judged)

    async def answer_refusal(self, ref: str, who: Identity, event: str
                             ) -> RespondResult | None:
        """Why ``who`` may not answer ``ref`` (audited as ``{event}_…``), or None when
        they may: for what is opened before an answer (an edit form), so a person who
        may not answer is told where they clicked, not after filling it in."""
        checked = await self.authorize(ref, who, event)
        return checked if isinstance(checked, RespondResult) else None

    async def judge(self, request: Judged, starter: Identity, who: Identity, copies: Copies,
                    *, cached: bool = False) -> Identity | Said:
        """Who ``who`` acts as on the open ``request`` (themselves, or the person who
        delegated to them), or why they may not. ``starter`` started its run (the
        self-approval rule). ``cached``: judged from the directory's fresh cache alone,
        so ``UNVERIFIED`` may only mean "not known yet"."""
        rules = policy.of(request, self._ctx.settings)
        if rules is None:
            return said("refused.route_gone")
        route = rules.route
        reason = await self.refusal(request, route, who, starter, copies, cached=cached)
        if reason == authz.NOT_ALLOWED:
            signs = await self.signer(rules, who, cached=cached)
            if signs is None:
                return authz.UNVERIFIED
            if signs:
                return who  # a sign-off group's member may answer
        if reason is None:
            return who
        # Out of office: someone may have delegated to ``who``.
        now = self._ctx.now()
        grants = await self._committer.read(lambda s: delegation.to_delegate(s, now, who))
        granted = await self.delegated_by(request, starter, route, who, copies, grants,
                                          cached=cached)
        if isinstance(granted, Identity):
            return granted
        return granted if granted is not None else reason

    async def delegated_by(
        self, request: Judged, starter: Identity, route: RouteSettings, who: Identity,
        copies: Copies, grants: list[delegation.DelegationView], *, cached: bool = False,
    ) -> Identity | Said | None:
        """The delegator ``who`` may act for ("Bob for Alice"), judged exactly as the
        delegator's own click; else why not (their own run, an ended delegation), or None
        when none of ``grants`` (the delegations naming ``who``) applies."""
        if not grants:
            return None
        active, ended = delegation.split(grants)
        self_approval = None
        for grant in active:
            principal = delegation.acting(who, grant)
            why = await self.refusal(request, route, principal, starter, copies,
                                     cached=cached)
            if why is None:
                own = (who.platform, who.user_id) == (starter.platform, starter.user_id)
                return delegation.OWN_RUN if own else principal
            if why == authz.SELF_APPROVAL:  # the delegator's own run: the rule still holds
                self_approval = why
        if self_approval is not None:
            return self_approval
        for grant in ended:
            principal = delegation.acting(who, grant)
            if await self.refusal(request, route, principal, starter, copies,
                                  cached=cached) is None:
                return delegation.ended_message(grant)
        return None

    async def signer(self, rules: policy.Policy, who: Identity, *,
                     cached: bool = False) -> bool | None:
        """Whether ``who`` belongs to one of the request's sign-off groups. A failed
        lookup counts as no; from the cache alone (``cached``) a miss is None: unknown."""
        lookups = self._platforms.cached_directory if cached else self._platforms.directory
        try:
            return await policy.is_signer(rules, self._ctx.settings, who, lookups)
        except DirectoryUnavailable:
            return None if cached else False
