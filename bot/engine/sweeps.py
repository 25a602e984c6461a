"""Sweeps: claim the reminders and escalations that fell due on pending requests.

Every replica sweeps, so each claim is a compare-and-set on the request row: it must
still be pending with ``next_reminder_at`` / ``escalate_at`` unchanged since it was
read (and on PostgreSQL the rows are picked ``FOR UPDATE SKIP LOCKED``). The claim
commits with its outbox row and audit row; the platform calls happen afterwards, in
``delivery``.
"""

from __future__ import annotations

import datetime as dt
from functools import partial

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from bot.engine import outbox, store
from bot.engine.base import EngineBase, log
from bot.engine.cards import build_card, localized
from bot.settings import RouteSettings
from renderers.text import reminder_text
from storage import HumanRequest, Run


class SweepsMixin(EngineBase):
    """Reminders and escalation of requests nobody has answered yet."""

    async def remind_and_escalate_due(self, limit: int = 200) -> int:
        """Claim due reminders and escalations of pending requests; returns how many.

        Each one is a compare-and-set on the request row (``status`` still pending and
        ``next_reminder_at`` / ``escalate_at`` unchanged since it was read; on PostgreSQL
        the rows are also picked with ``FOR UPDATE SKIP LOCKED``), committed with its
        outbox row (``remind``, or ``deliver_request`` to the escalation route) and its
        audit row (``reminded`` / ``escalated``). So several processes sweeping at once
        remind once, and a request decided first is never reminded or escalated.
        """
        return await self._tx(partial(self._claim_due, limit=limit))

    def _claim_due(self, session: Session, *, limit: int) -> int:
        now = self.now()
        not_overdue = or_(HumanRequest.deadline.is_(None), HumanRequest.deadline > now)
        claimed = 0
        for column in (HumanRequest.next_reminder_at, HumanRequest.escalate_at):
            query = (select(HumanRequest)
                     .where(HumanRequest.status == store.OPEN, column <= now, not_overdue)
                     .order_by(column).limit(limit))
            if self.db.is_postgres:
                query = query.with_for_update(skip_locked=True)
            for request in session.scalars(query).all():
                if column is HumanRequest.next_reminder_at:
                    claimed += self._claim_reminder(session, now, request)
                else:
                    claimed += self._claim_escalation(session, now, request)
        return claimed

    def _claim_reminder(self, session: Session, now: dt.datetime, request: HumanRequest) -> bool:
        """Compare-and-set one due reminder; schedule the next one (or none)."""
        route = self.settings.routes.get(request.route)
        old = request.next_reminder_at
        sent = request.reminders_sent + 1
        remind = (route is not None and route.reminder is not None
                  and sent <= route.max_reminders)
        upcoming: dt.datetime | None = None
        if remind and route is not None:
            upcoming = _next_reminder(route, request, old, sent, now)
        changed = store.rowcount(session.execute(
            update(HumanRequest)
            .where(HumanRequest.id == request.id, HumanRequest.status == store.OPEN,
                   HumanRequest.next_reminder_at == old)
            .values(next_reminder_at=upcoming,
                    reminders_sent=HumanRequest.reminders_sent + int(remind), updated_at=now)
            .execution_options(synchronize_session=False)))
        if changed != 1 or not remind:
            return False  # someone else claimed it, it was decided, or reminders were removed
        run = session.get(Run, request.run_id)
        card = localized(build_card(request, run.agent if run else "agent"),
                         self.settings.routes.get(request.route))
        outbox.enqueue(session, now, self.outbox_lease, "remind", request_id=request.id,
                       run_id=request.run_id,
                       payload={"ref": request.ref, "number": sent,
                                "text": reminder_text(card, sent)})
        store.audit(session, now, "reminded", run_id=request.run_id, ref=request.ref,
                    details={"number": sent, "next_reminder_at":
                             upcoming.isoformat() if upcoming else None})
        return True

    def _claim_escalation(self, session: Session, now: dt.datetime,
                          request: HumanRequest) -> bool:
        """Compare-and-set one due escalation; queue delivering the card to its route."""
        route = self.settings.routes.get(request.route)
        escalation = route.escalation if route is not None else None
        target = escalation.route if escalation is not None else None
        if target is not None and target not in self.settings.routes:
            target = None
        changed = store.rowcount(session.execute(
            update(HumanRequest)
            .where(HumanRequest.id == request.id, HumanRequest.status == store.OPEN,
                   HumanRequest.escalate_at == request.escalate_at,
                   HumanRequest.escalated_at.is_(None))
            .values(escalate_at=None, escalated_at=now if target else None,
                    escalation_route=target, updated_at=now)
            .execution_options(synchronize_session=False)))
        if changed != 1 or target is None:
            return False
        outbox.enqueue(session, now, self.outbox_lease, "deliver_request",
                       request_id=request.id, run_id=request.run_id,
                       payload={"ref": request.ref, "route": target})
        store.audit(session, now, "escalated", run_id=request.run_id, ref=request.ref,
                    details={"from_route": request.route, "to_route": target})
        log.info("request escalated", extra={"ref": request.ref, "route": target})
        return True


def _next_reminder(
    route: RouteSettings, request: HumanRequest, old: dt.datetime | None, sent: int,
    now: dt.datetime,
) -> dt.datetime | None:
    """When reminder ``sent + 1`` is due: None after the last one, or at/after the deadline.

    Periods missed while no worker ran are skipped, so a backlog never fires in a burst.
    """
    if route.reminder is None or sent >= route.max_reminders:
        return None
    assert old is not None
    step = dt.timedelta(seconds=route.reminder)
    upcoming = old + step if old + step > now else now + step
    if request.deadline is not None and upcoming >= request.deadline:
        return None
    return upcoming
