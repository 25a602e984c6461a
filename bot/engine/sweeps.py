"""Sweeps: claim the reminders and escalation steps that fell due on pending requests.

Every replica sweeps, so each claim is a compare-and-set on the request row: it must
still be pending with ``next_reminder_at`` / ``escalate_at`` unchanged since it was
read, and for an escalation chain ``escalation_step`` too (on PostgreSQL the rows are
picked ``FOR UPDATE SKIP LOCKED``). Times come from ``waiting`` (durations or
percentages of the timeout, read through ``waiting_policy``). The claim
commits with its outbox row and audit row; the platform calls happen afterwards, in
``delivery``.
"""

from __future__ import annotations

import datetime as dt
from functools import partial

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from bot.engine import outbox, policy, store, waiting
from bot.engine.cards import build_card, localized
from bot.engine.committer import Committer, log
from bot.engine.context import EngineContext
from bot.engine.waiting import waiting_policy
from renderers.text import reminder_text
from storage import HumanRequest, Run


class Reminders:
    """Reminders and escalation of requests nobody has answered yet."""

    def __init__(self, ctx: EngineContext, committer: Committer) -> None:
        self._ctx = ctx
        self._committer = committer

    async def remind_and_escalate_due(self, limit: int = 200) -> int:
        """Claim due reminders and escalations of pending requests; returns how many.

        Each one is a compare-and-set on the request row (``status`` still pending and
        ``next_reminder_at`` / ``escalate_at`` unchanged since it was read; on PostgreSQL
        the rows are also picked with ``FOR UPDATE SKIP LOCKED``), committed with its
        outbox row (``remind``, or ``deliver_request`` to the escalation route) and its
        audit row (``reminded`` / ``escalated``). So several processes sweeping at once
        remind once, and a request decided first is never reminded or escalated.
        """
        return await self._committer.tx(partial(self._claim_due, limit=limit))

    def _claim_due(self, session: Session, *, limit: int) -> int:
        now = self._ctx.now()
        not_overdue = or_(HumanRequest.deadline.is_(None), HumanRequest.deadline > now)
        claimed = 0
        for column in (HumanRequest.next_reminder_at, HumanRequest.escalate_at):
            query = (select(HumanRequest)
                     .where(HumanRequest.status == store.OPEN, column <= now, not_overdue)
                     .order_by(column).limit(limit))
            if self._ctx.db.is_postgres:
                query = query.with_for_update(skip_locked=True)
            for request in session.scalars(query).all():
                if column is HumanRequest.next_reminder_at:
                    claimed += self._claim_reminder(session, now, request)
                else:
                    claimed += self._claim_escalation(session, now, request)
        return claimed

    def _claim_reminder(self, session: Session, now: dt.datetime, request: HumanRequest) -> bool:
        """Compare-and-set one due reminder; schedule the next one (or none).

        The card records when it was last reminded (``reminded_at``, a new version), so
        every copy is updated with the reminder."""
        route = waiting_policy(self._ctx.settings, request)
        old = request.next_reminder_at
        sent = request.reminders_sent + 1
        remind = (route is not None and route.reminder is not None
                  and sent <= route.max_reminders)
        upcoming: dt.datetime | None = None
        if remind and route is not None:
            upcoming = waiting.next_reminder(route, request, old, sent, now)
        changed = store.rowcount(session.execute(
            update(HumanRequest)
            .where(HumanRequest.id == request.id, HumanRequest.status == store.OPEN,
                   HumanRequest.next_reminder_at == old)
            .values(next_reminder_at=upcoming,
                    reminders_sent=HumanRequest.reminders_sent + int(remind),
                    reminded_at=now if remind else HumanRequest.reminded_at,
                    version=HumanRequest.version + int(remind), updated_at=now)
            .execution_options(synchronize_session=False)))
        if changed != 1 or not remind:
            return False  # someone else claimed it, it was decided, or reminders were removed
        run = session.get(Run, request.run_id)
        card = localized(build_card(request, run.agent if run else "agent"),
                         self._ctx.settings.routes.get(request.route))
        outbox.enqueue(session, now, self._ctx.outbox_hold(), "remind", request_id=request.id,
                       run_id=request.run_id,
                       payload={"ref": request.ref, "number": sent,
                                "text": reminder_text(card, sent)})
        self._queue_card_update(session, now, request)
        store.audit(session, now, "reminded", run_id=request.run_id, ref=request.ref,
                    details={"number": sent, "next_reminder_at":
                             upcoming.isoformat() if upcoming else None})
        return True

    def _claim_escalation(self, session: Session, now: dt.datetime,
                          request: HumanRequest) -> bool:
        """Compare-and-set the next due step of the escalation chain; queue delivering the
        card to its route and updating the copies already out ("escalated to …").

        The claim moves ``escalation_step`` on by one from the value read, so each step is
        taken by one sweep across replicas; a step whose route is gone is skipped."""
        route = waiting_policy(self._ctx.settings, request)
        chain = (route.escalation or []) if route is not None else []
        step = request.escalation_step or 0
        target = chain[step].route if step < len(chain) else None
        rules = policy.of(request, self._ctx.settings)
        if target is not None and (rules.route_named(target, self._ctx.settings) if rules else
                                   self._ctx.settings.routes.get(target)) is None:
            target = None  # gone from the config and never frozen: skip the step
        upcoming = waiting.step_due(route, request, step + 1) if route is not None else None
        reached = waiting.reached_routes(request)
        values: dict[str, object] = {"escalate_at": upcoming,
                                     "escalation_step": HumanRequest.escalation_step + 1,
                                     "updated_at": now}
        if target is not None:
            values.update(escalated_at=now, escalation_route=target,
                          escalated_routes=[*reached, target],
                          version=HumanRequest.version + 1)
        changed = store.rowcount(session.execute(
            update(HumanRequest)
            .where(HumanRequest.id == request.id, HumanRequest.status == store.OPEN,
                   HumanRequest.escalate_at == request.escalate_at,
                   HumanRequest.escalation_step == step)
            .values(**values)
            .execution_options(synchronize_session=False)))
        if changed != 1 or target is None:
            return False
        outbox.enqueue(session, now, self._ctx.outbox_hold(), "deliver_request",
                       request_id=request.id, run_id=request.run_id,
                       payload={"ref": request.ref, "route": target})
        self._queue_card_update(session, now, request)
        store.audit(session, now, "escalated", run_id=request.run_id, ref=request.ref,
                    details={"from_route": request.route, "to_route": target,
                             "step": step + 1})
        log.info("request escalated", extra={"ref": request.ref, "route": target,
                                             "step": step + 1})
        return True

    def _queue_card_update(self, session: Session, now: dt.datetime,
                           request: HumanRequest) -> None:
        """Update every copy to the version the claim just wrote (one past the read)."""
        outbox.enqueue(session, now, self._ctx.outbox_hold(), "update_card",
                       request_id=request.id, run_id=request.run_id,
                       payload={"ref": request.ref, "version": request.version + 1})
