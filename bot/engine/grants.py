"""``Grants``: standing grants as people see them (list, show, revoke) and their sweep.

A grant is made by a decision (``grant_hook``, in the decision's own transaction) and
used by the doors that create tool approvals (``grant_use``); this service is what is
left: listing the active grants a person may see, revoking one (allowed to whoever may
answer the grant's route, exactly as a click on one of its cards is judged, or to an
operator at the CLI), and the time sweep that audits ``grant_expired``. Lookups never
use a grant past its time, so the sweep only writes the audit row and the mark.
"""

from __future__ import annotations

from functools import partial

from sqlalchemy.orm import Session

from bot.engine import authz, grant_rows, policy
from bot.engine.access import Authorizer
from bot.engine.committer import Committer, log
from bot.engine.context import EngineContext
from bot.engine.ports import Identity
from bot.engine.results import GrantView, RespondResult
from bot.settings import RouteSettings
from renderers.words import Said, said
from storage.grants import Grant

NOBODY = Identity("grant", "-", "-")
"""The "starter" a route check uses: grants have no run, so self-approval never applies."""


class Grants:
    """List, show, revoke and expire standing grants."""

    def __init__(self, ctx: EngineContext, committer: Committer,
                 authorizer: Authorizer) -> None:
        self._ctx = ctx
        self._committer = committer
        self._authorizer = authorizer

    async def active_grants(self, who: Identity) -> list[GrantView]:
        """Active grants on routes ``who`` may answer, newest first."""
        now = self._ctx.now()
        found = await self._committer.read(partial(grant_rows.listed, now=now))
        allowed: dict[str, bool] = {}
        shown = []
        for grant in found:
            if grant.route not in allowed:
                allowed[grant.route] = await self.refusal(grant.route, who) is None
            if allowed[grant.route]:
                shown.append(grant)
        return shown

    async def grant(self, grant_id: int) -> GrantView | None:
        """One grant, active or not (None: no such grant)."""

        def find(session: Session) -> GrantView | None:
            row = session.get(Grant, grant_id)
            return grant_rows.view_of(row) if row is not None else None

        return await self._committer.read(find)

    async def listed(self, *, route: str | None = None,
                     include_inactive: bool = False) -> list[GrantView]:
        """Every grant (the CLI: the operator sees all), newest first."""
        now = self._ctx.now()
        return await self._committer.read(partial(
            grant_rows.listed, now=now, routes=[route] if route else None,
            include_inactive=include_inactive))

    async def refusal(self, route_name: str, who: Identity) -> Said | None:
        """None when ``who`` may answer ``route_name`` (its approvers on their platform,
        the members of the chat it delivers to when ``channel_members``, or a member of
        one of its sign-off groups); otherwise why not."""
        route = self._ctx.settings.routes.get(route_name)
        if route is None:
            return said("grant.route_gone", route=route_name)
        channel = authz.route_channel(route, who.platform)
        reason = await authz.refusal(_any_starter(route), who, NOBODY,
                                     [channel] if channel else [],
                                     self._authorizer.directory(who.platform))
        if reason == authz.NOT_ALLOWED:
            rules = policy.Policy.from_route(route_name, route, self._ctx.settings)
            if await self._authorizer.signer(rules, who):
                return None
        return reason

    async def revoke_grant(self, grant_id: int, who: Identity) -> RespondResult:
        """Revoke a grant for someone who may answer its route; takes effect at once
        (the next matching call gets a card)."""
        found = await self.grant(grant_id)
        if found is None:
            return RespondResult("not_found", said("grant.not_found", grant=f"G-{grant_id}"))
        reason = await self.refusal(found.route, who)
        if reason is not None:
            log.info("grant revoke refused", extra={"grant": found.label,
                                                    "user": who.user_id})
            return RespondResult("rejected", said("grant.revoke_refused", grant=found.label,
                                                  reason=reason))
        return await self._revoke(found, who)

    async def revoke_grant_as_operator(self, grant_id: int,
                                       operator: Identity) -> RespondResult:
        """An operator at the CLI (the database's own credentials) revokes a grant."""
        found = await self.grant(grant_id)
        if found is None:
            return RespondResult("not_found", said("grant.not_found", grant=f"G-{grant_id}"))
        return await self._revoke(found, operator)

    async def _revoke(self, found: GrantView, who: Identity) -> RespondResult:
        now = self._ctx.now()
        outcome = await self._committer.tx(
            lambda s: grant_rows.revoke(s, now, found.id, who))
        if outcome == "accepted":
            log.info("grant revoked", extra={"grant": found.label, "user": who.user_id})
            return RespondResult("accepted", said("grant.revoked", grant=found.label))
        if outcome == "not_found":
            return RespondResult("not_found", said("grant.not_found", grant=found.label))
        return RespondResult("already_decided", said("grant.already_ended", grant=found.label))

    async def expire_due(self) -> int:
        """Mark grants past their time expired, auditing each once (any replica)."""
        now = self._ctx.now()
        count = await self._committer.tx(lambda s: grant_rows.expire_due(s, now))
        if count:
            log.info("grants expired", extra={"count": count})
        return count


def _any_starter(route: RouteSettings) -> RouteSettings:
    """``route`` judged without a run: self-approval has no meaning for a grant."""
    return route.model_copy(update={"allow_self_approval": True})
