"""Standing grants as rows: create, match, use (a compare-and-set), revoke, expire.

Plain functions over a ``Session``, called inside the transactions of the services
(``Grants``, the decision hook, the two doors that create tool approvals). A use is
one conditional ``UPDATE … WHERE uses < max_uses AND not revoked AND not expired``
whose row count is the verdict, so concurrent matching calls, on any number of
replicas, never use a grant more than ``max_uses`` times; on PostgreSQL the row lock
makes a second UPDATE re-check the row the first one committed.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

from sqlalchemy import Table, and_, select, update
from sqlalchemy.orm import Session

from bot.engine import store
from bot.engine.cards import as_utc
from bot.engine.ports import Identity
from bot.engine.results import GrantView
from bot.tools.rules import Rule, RuleError, compile_rule, scope_holds
from storage.grants import Grant

log = logging.getLogger("askhuman.engine")

PLATFORM = "grant"
"""``decided_by_platform`` of a request approved by a standing grant."""
CANDIDATES = 50
"""Active grants read per lookup (newest first); more than this for one agent and tool
is unusual, and an older one beyond it simply is not tried."""

_GRANTS = cast(Table, Grant.__table__)


def label(grant_id: int) -> str:
    """"G-7": how people name a grant."""
    return f"G-{grant_id}"


def parse_label(text: str) -> int | None:
    """``"G-7"``, ``"g7"`` or ``"7"`` → 7 (None: not a grant id)."""
    digits = text.strip().upper().removeprefix("G").removeprefix("-")
    return int(digits) if digits.isdigit() and len(digits) < 12 else None


def view_of(row: Grant) -> GrantView:
    created, expires = as_utc(row.created_at), as_utc(row.expires_at)
    assert created is not None and expires is not None
    return GrantView(
        id=row.id, label=label(row.id), route=row.route, agent=row.agent, tool=row.tool,
        scope=row.scope, args=dict(row.args or {}), granted_by=row.granted_by_name,
        created_at=created, expires_at=expires, max_uses=row.max_uses, uses=row.uses,
        revoked_at=as_utc(row.revoked_at), expired_at=as_utc(row.expired_at),
        request_ref=row.request_ref)


def active(now: dt.datetime) -> Any:
    """The SQL condition of a usable grant at ``now`` (time is checked here, so an
    expired grant is never used even before the sweep marks it)."""
    return and_(Grant.revoked_at.is_(None), Grant.expired_at.is_(None),
                Grant.expires_at > now, Grant.uses < Grant.max_uses)


@dataclass(frozen=True)
class Terms:
    """What a decision grants: limits already capped by the route."""

    seconds: float
    uses: int


@dataclass(frozen=True)
class Granted:
    """The call the grant is made from."""

    route: str
    agent: str
    tool: str
    scope: str | None
    args: dict[str, Any]
    binding: str
    request_ref: str
    run_id: str | None


def create(session: Session, now: dt.datetime, granted: Granted, terms: Terms,
           by: Sequence[Identity]) -> Grant:
    """Store a grant and audit ``grant_created`` with its terms (caller's transaction)."""
    first = by[0]
    names = ", ".join(who.display_name or who.user_id for who in by)
    row = Grant(route=granted.route, agent=granted.agent, tool=granted.tool,
                scope=granted.scope, args=granted.args, binding=granted.binding,
                granted_by_platform=first.platform, granted_by_user=first.user_id,
                granted_by_name=names[:400],
                granted_by=[{"platform": w.platform, "user_id": w.user_id,
                             "name": w.display_name} for w in by],
                request_ref=granted.request_ref, created_at=now,
                expires_at=now + dt.timedelta(seconds=terms.seconds), max_uses=terms.uses,
                uses=0)
    session.add(row)
    session.flush()
    store.audit(session, now, "grant_created", run_id=granted.run_id, ref=granted.request_ref,
                actor=first, details={
                    "grant": label(row.id), "route": granted.route, "agent": granted.agent,
                    "tool": granted.tool, "scope": granted.scope, "binding": granted.binding,
                    "max_uses": terms.uses, "expires_at": row.expires_at.isoformat(),
                    "granted_by": names})
    return row


@lru_cache(maxsize=256)
def _scope(source: str) -> Rule | None:
    try:
        return compile_rule(source)
    except RuleError:
        log.warning("a grant's scope does not compile; it matches nothing",
                    extra={"scope": source[:200]})
        return None


def matches(row: Grant, args: Mapping[str, Any], binding: str) -> bool:
    """The exact same call (binding hash) without a scope; else the scope's CEL over
    ``args`` (the new call) and ``call`` (the granted one). An error is no match."""
    if row.scope is None:
        return row.binding == binding
    rule = _scope(row.scope)
    return rule is not None and scope_holds(rule, dict(args), dict(row.args or {}))


def use(session: Session, now: dt.datetime, *, agent: str, tool: str,
        args: Mapping[str, Any], binding: str) -> Grant | None:
    """Use the newest active grant that matches this call, counted with a compare-and-set;
    None when none matches or every match ran out in between. The last use marks the
    grant expired and audits ``grant_expired``."""
    rows = session.scalars(
        select(Grant).where(Grant.agent == agent, Grant.tool == tool, active(now))
        .order_by(Grant.id.desc()).limit(CANDIDATES)).all()
    for row in rows:
        if not matches(row, args, binding):
            continue
        used = store.core(session).execute(
            update(_GRANTS).where(_GRANTS.c.id == row.id, _GRANTS.c.uses < _GRANTS.c.max_uses,
                                  _GRANTS.c.revoked_at.is_(None), _GRANTS.c.expired_at.is_(None),
                                  _GRANTS.c.expires_at > now)
            .values(uses=_GRANTS.c.uses + 1).returning(_GRANTS.c.uses)).scalar()
        if used is None:
            continue  # another call took the last use first
        session.expire(row)
        if int(used) >= row.max_uses:
            row.expired_at = now
            store.audit(session, now, "grant_expired", ref=row.request_ref, details={
                "grant": label(row.id), "why": "uses", "uses": int(used)})
        return row
    return None


def revoke(session: Session, now: dt.datetime, grant_id: int, who: Identity) -> str:
    """``accepted`` | ``already_decided`` (revoked or run out before) | ``not_found``."""
    done = store.core(session).execute(
        update(_GRANTS).where(_GRANTS.c.id == grant_id, _GRANTS.c.revoked_at.is_(None),
                              _GRANTS.c.expired_at.is_(None))
        .values(revoked_at=now, revoked_by=(who.display_name or who.user_id)[:400]))
    if store.rowcount(done) == 1:
        row = session.get(Grant, grant_id)
        store.audit(session, now, "grant_revoked", ref=row.request_ref if row else None,
                    actor=who, details={"grant": label(grant_id)})
        return "accepted"
    return "already_decided" if session.get(Grant, grant_id) is not None else "not_found"


def expire_due(session: Session, now: dt.datetime, limit: int = 500) -> int:
    """Mark grants past their time ``expired`` and audit each ``grant_expired``; a
    compare-and-set per row, so two replicas' sweeps audit each grant once."""
    due = session.scalars(
        select(Grant).where(Grant.revoked_at.is_(None), Grant.expired_at.is_(None),
                            Grant.expires_at <= now).order_by(Grant.id).limit(limit)).all()
    count = 0
    for row in due:
        done = store.core(session).execute(
            update(_GRANTS).where(_GRANTS.c.id == row.id, _GRANTS.c.expired_at.is_(None),
                                  _GRANTS.c.revoked_at.is_(None))
            .values(expired_at=now))
        if store.rowcount(done) == 1:
            count += 1
            store.audit(session, now, "grant_expired", ref=row.request_ref, details={
                "grant": label(row.id), "why": "time", "uses": row.uses})
    return count


def listed(session: Session, now: dt.datetime, *, routes: Sequence[str] | None = None,
           include_inactive: bool = False, limit: int = 500) -> list[GrantView]:
    """Grants, newest first: active ones only unless ``include_inactive``."""
    query = select(Grant)
    if not include_inactive:
        query = query.where(active(now))
    if routes is not None:
        query = query.where(Grant.route.in_(list(routes)))
    return [view_of(row) for row in session.scalars(query.order_by(Grant.id.desc())
                                                     .limit(limit))]
