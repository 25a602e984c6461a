"""Delegation (out of office): an approver hands their approvals to someone until a date.

A delegate may answer whatever the delegator may answer (judged exactly as a click by
the delegator would be, self-approval rule included), except runs the delegate started.
The vote and the decision count as the delegator's (one person, one vote), shown and
audited as "Bob for Alice" with the delegate's own id (``Identity.via``,
``decided_via``). A delegation ends at ``until`` or when revoked; a click by a former
delegate is refused with words saying so. Delegations are per platform (user ids are).

Helpers here take a ``Session`` (the CLI); ``delegation_chat.Delegations`` runs them
through the engine's transactions (adapters: ``/askhuman delegate``, the Feishu
``delegate`` command).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from bot.engine import store
from bot.engine.cards import as_utc
from bot.engine.ports import Identity
from renderers.words import Said, said
from storage import Delegation

UNTIL_HINT = said("delegation.until_hint")
OWN_RUN = said("refused.own_run")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class DelegationError(ValueError):
    """A delegation that cannot be made; ``words`` say why and what to do (``str()``:
    in English, for the CLI)."""

    def __init__(self, words: Said) -> None:
        super().__init__(str(words))
        self.words = words


@dataclass(frozen=True)
class DelegationView:
    id: int
    platform: str
    from_user: str
    from_name: str | None
    to_user: str
    to_name: str | None
    until: dt.datetime
    state: str
    """active | expired | revoked."""

    def as_dict(self) -> dict[str, Any]:
        until = as_utc(self.until)
        return {"id": self.id, "platform": self.platform, "from": self.from_user,
                "from_name": self.from_name, "to": self.to_user, "to_name": self.to_name,
                "until": until.isoformat().replace("+00:00", "Z") if until else None,
                "state": self.state}


def parse_until(text: str, now: dt.datetime) -> dt.datetime:
    """``2026-12-24`` (start of that day, UTC) or an ISO time → naive UTC, in the future."""
    value = text.strip()
    try:
        moment = (dt.datetime.fromisoformat(value + "T00:00") if _DATE.match(value)
                  else dt.datetime.fromisoformat(value))
    except ValueError:
        raise DelegationError(said("delegation.not_a_date", value=value[:40],
                                   hint=UNTIL_HINT)) from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC).replace(tzinfo=None)
    if moment <= now:
        raise DelegationError(said("delegation.not_future", value=value[:40]))
    return moment


def name_of(user: str, name: str | None) -> str:
    return name or user


def _view(row: Delegation, now: dt.datetime) -> DelegationView:
    state = "revoked" if row.revoked_at else ("expired" if row.until <= now else "active")
    return DelegationView(row.id, row.platform, row.from_user, row.from_name, row.to_user,
                          row.to_name, row.until, state)


def add(session: Session, now: dt.datetime, frm: Identity, to: Identity, until: dt.datetime,
        created_by: str) -> DelegationView:
    """Hand ``frm``'s approvals to ``to`` until ``until``; replaces an active delegation
    between the same two people. Audited ``delegation_added``."""
    if frm.platform != to.platform:
        raise DelegationError(said("delegation.other_platform"))
    if frm.user_id == to.user_id:
        raise DelegationError(said("delegation.to_self"))
    if until <= now:
        raise DelegationError(said("delegation.end_past"))
    _revoke_rows(session, now, frm, to.user_id, created_by)
    row = Delegation(platform=frm.platform, from_user=frm.user_id, from_name=frm.display_name,
                     to_user=to.user_id, to_name=to.display_name, until=until,
                     created_by=created_by[:200], created_at=now)
    session.add(row)
    session.flush()
    store.audit(session, now, "delegation_added", actor=frm,
                details={"to": to.user_id, "until": until.isoformat(), "by": created_by[:200],
                         "delegation": row.id})
    return _view(row, now)


def _revoke_rows(session: Session, now: dt.datetime, frm: Identity, to_user: str | None,
                 by: str) -> int:
    query = (update(Delegation)
             .where(Delegation.platform == frm.platform, Delegation.from_user == frm.user_id,
                    Delegation.revoked_at.is_(None), Delegation.until > now)
             .values(revoked_at=now, revoked_by=by[:200])
             .execution_options(synchronize_session=False))
    if to_user is not None:
        query = query.where(Delegation.to_user == to_user)
    return store.rowcount(session.execute(query))


def revoke(session: Session, now: dt.datetime, frm: Identity, to_user: str | None,
           by: str) -> int:
    """End ``frm``'s active delegations (to ``to_user`` only, if given); how many ended."""
    ended = _revoke_rows(session, now, frm, to_user, by)
    if ended:
        store.audit(session, now, "delegation_revoked", actor=frm,
                    details={"to": to_user, "count": ended, "by": by[:200]})
    return ended


def listing(session: Session, now: dt.datetime, platform: str | None = None,
            user: str | None = None, ended: bool = False) -> list[DelegationView]:
    """Delegations (active only unless ``ended``), optionally of one person either way."""
    query = select(Delegation).order_by(Delegation.id)
    if platform is not None:
        query = query.where(Delegation.platform == platform)
    if user is not None:
        query = query.where(or_(Delegation.from_user == user, Delegation.to_user == user))
    if not ended:
        query = query.where(Delegation.revoked_at.is_(None), Delegation.until > now)
    return [_view(row, now) for row in session.scalars(query)]


def to_delegate(session: Session, now: dt.datetime, who: Identity) -> list[DelegationView]:
    """Every delegation (active or ended) naming ``who`` as the delegate, newest first."""
    rows = session.scalars(select(Delegation)
                           .where(Delegation.platform == who.platform,
                                  Delegation.to_user == who.user_id)
                           .order_by(Delegation.id.desc()).limit(50))
    return [_view(row, now) for row in rows]


def acting(who: Identity, grant: DelegationView) -> Identity:
    """The delegator, as the delegate acts for them: "Bob for Alice", via Bob's id."""
    label = f"{name_of(who.user_id, who.display_name)} for " \
            f"{name_of(grant.from_user, grant.from_name)}"
    return Identity(who.platform, grant.from_user, label[:200], via=who.user_id)


def ended_message(grant: DelegationView) -> Said:
    until = as_utc(grant.until)
    who = name_of(grant.from_user, grant.from_name)
    if grant.state == "revoked":
        return said("refused.delegation_revoked", who=who)
    when = f"{until:%Y-%m-%d %H:%M UTC}" if until else said("delegation.earlier")
    return said("refused.delegation_ended", who=who, when=when)


def split(grants: Iterable[DelegationView]) -> tuple[list[DelegationView], list[DelegationView]]:
    """(active, ended) delegations."""
    items = list(grants)
    return ([g for g in items if g.state == "active"], [g for g in items if g.state != "active"])
