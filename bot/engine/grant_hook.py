"""Making a standing grant from a decision, in the decision's own transaction.

``Decider.decide`` calls ``after_approval`` once a tool approval is decided approved.
Approve-family votes ("Approve", "Approve and allow similar…") counted together for
the quorum (``policy.verdict``); the grant is made only when every one of them chose
"Approve and allow similar…", with the smallest duration and number of uses any of
them picked, capped by the route's ``grants`` as frozen with the request *and* as
configured now (a config that removed ``grants`` stops new grants). Mixed votes
approve the call without a grant. What the person who decided is told says which.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from bot.engine import grant_rows, policy
from bot.engine.context import EngineContext
from bot.engine.ports import Identity
from bot.settings import GrantSettings, RouteSettings
from bot.tools.approval import APPROVE_FAMILY, APPROVE_GRANT
from renderers.card import GrantOffer
from renderers.tool_card import (
    DEFAULT_SECONDS,
    DEFAULT_USES,
    GRANT_DURATION_FIELD,
    GRANT_USES_FIELD,
    span_text,
)
from renderers.words import Said, said
from storage import HumanRequest, Run, Vote

GRANT_CALL = "grant_call"
"""Key in ``human_requests.tool``: the call's full canonical arguments (fixed values
included), kept when the card offers a grant (the card's own copy may be cut)."""


def offer(route: RouteSettings) -> GrantOffer | None:
    """What a tool-approval card on ``route`` offers (None: no grants there)."""
    limits = route.grants
    return GrantOffer(limits.max_duration, limits.max_uses) if limits is not None else None


def after_approval(session: Session, ctx: EngineContext, now: dt.datetime,
                   request: HumanRequest, votes: Sequence[Vote]) -> Said | None:
    """Create the grant the approving votes agreed on, if any; the words for the person
    whose vote decided (None: nobody asked for a grant, say the usual)."""
    approving = [v for v in votes if v.action_id in APPROVE_FAMILY]
    if not any(v.action_id == APPROVE_GRANT for v in approving):
        return None
    if any(v.action_id != APPROVE_GRANT for v in approving):
        return said("grant.not_made_mixed")
    rules = policy.of(request, ctx.settings)
    live = ctx.settings.routes.get(request.route)
    caps = [r.grants for r in (rules.route if rules else None, live) if r is not None]
    if len(caps) < 2 or any(c is None for c in caps):
        return said("grant.not_made_off", route=request.route)
    tool = request.tool or {}
    terms = _terms(approving, [c for c in caps if c is not None], request.args)
    run = session.get(Run, request.run_id)
    call = tool.get(GRANT_CALL)
    scope = tool.get("grant_scope")
    granted = grant_rows.Granted(
        route=request.route, agent=run.agent if run is not None else "", tool=str(tool.get("tool")),
        scope=scope if isinstance(scope, str) and scope else None,
        args=dict(call) if isinstance(call, dict) else {}, binding=request.binding or "",
        request_ref=request.ref, run_id=request.run_id)
    voters = [Identity(v.platform, v.user_id, v.display_name) for v in approving]
    row = grant_rows.create(session, now, granted, terms, voters)
    return said("grant.made", grant=grant_rows.label(row.id), uses=terms.uses,
                span=span_text(terms.seconds))


def _terms(votes: Sequence[Vote], caps: Sequence[GrantSettings],
           args: dict[str, Any] | None) -> grant_rows.Terms:
    """The smallest duration and uses any vote picked (a field left alone counts as its
    default), within every cap."""
    defaults = {f.get("name"): f.get("default") for f in (args or {}).get("fields") or []}
    seconds = min(_number(v.values, GRANT_DURATION_FIELD, defaults, DEFAULT_SECONDS)
                  for v in votes)
    uses = min(_number(v.values, GRANT_USES_FIELD, defaults, DEFAULT_USES) for v in votes)
    for cap in caps:
        seconds, uses = min(seconds, cap.max_duration), min(uses, cap.max_uses)
    return grant_rows.Terms(seconds=float(seconds), uses=int(max(1, uses)))


def _number(values: dict[str, Any] | None, name: str, defaults: dict[Any, Any],
            fallback: int) -> float:
    for raw in ((values or {}).get(name), defaults.get(name)):
        try:
            if raw not in (None, ""):
                return float(raw)
        except (TypeError, ValueError):
            continue
    return float(fallback)
