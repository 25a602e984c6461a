"""Waiting: the clocks of an open request — reminders, the escalation chain, timeouts.

Everything here reads a request's waiting rules through ``waiting_policy`` (one seam:
the request's frozen policy, ``bot.engine.policy``), and
turns spans (``"30m"`` or ``"50%"`` of the timeout) into times from the request's own
``created_at`` and ``deadline``, so a step's time never depends on which replica
computes it.

Durable state on the request row: ``next_reminder_at`` / ``reminders_sent`` /
``reminded_at`` for reminders, ``escalate_at`` (when the next step is due),
``escalation_step`` (how many steps were reached: the sweep's compare-and-set) and
``escalated_routes`` (who was added) for the chain.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from sqlalchemy import ColumnElement, String, cast, or_, select
from sqlalchemy.orm import Session

from bot.engine import outbox, policy, store
from bot.engine.cards import as_utc, reached_routes
from bot.settings import RouteSettings, Settings, span_seconds
from renderers.markdown import plain, truncate
from storage import HumanRequest, Run

if TYPE_CHECKING:
    from bot.engine.context import EngineContext

__all__ = ["next_reminder", "reached_routes", "start_clocks", "step_due", "waiting_policy"]


def waiting_policy(settings: Settings, request: HumanRequest) -> RouteSettings | None:
    """The reminder / escalation / timeout rules that govern ``request``: its frozen
    policy (``bot.engine.policy``), so a reload never moves an open request's clocks
    (None: a request stored before policies were frozen whose route is gone, so nothing
    more is sent)."""
    rules = policy.of(request, settings)
    return rules.route if rules is not None else None


def _timeout(request: HumanRequest, route: RouteSettings) -> float:
    """Seconds the request waits: from its own deadline when it has one."""
    if request.deadline is not None and request.created_at is not None:
        return (request.deadline - request.created_at).total_seconds()
    return route.timeout


def reminder_period(route: RouteSettings, request: HumanRequest) -> float | None:
    """Seconds between reminders of ``request`` (None: no reminders)."""
    if route.reminder is None:
        return None
    return span_seconds(route.reminder, _timeout(request, route))


def step_due(route: RouteSettings, request: HumanRequest, index: int) -> dt.datetime | None:
    """When escalation step ``index`` (0-based) falls due; None past the chain's end."""
    chain = route.escalation or []
    if index >= len(chain):
        return None
    after = span_seconds(chain[index].after, _timeout(request, route))
    return request.created_at + dt.timedelta(seconds=after)


def start_clocks(request: HumanRequest, route: RouteSettings, now: dt.datetime) -> None:
    """Set the first reminder and the first escalation step of a new request.

    Called where a request is created (``created_at`` and ``deadline`` already set)."""
    request.reminders_sent = 0
    request.escalation_step = 0
    period = reminder_period(route, request)
    request.next_reminder_at = now + dt.timedelta(seconds=period) if period else None
    request.escalate_at = step_due(route, request, 0)


def next_reminder(
    route: RouteSettings, request: HumanRequest, old: dt.datetime | None, sent: int,
    now: dt.datetime,
) -> dt.datetime | None:
    """When reminder ``sent + 1`` is due: None after the last one, or at/after the deadline.

    Periods missed while no worker ran are skipped, so a backlog never fires in a burst.
    """
    period = reminder_period(route, request)
    if period is None or sent >= route.max_reminders:
        return None
    assert old is not None
    step = dt.timedelta(seconds=period)
    upcoming = old + step if old + step > now else now + step
    if request.deadline is not None and upcoming >= request.deadline:
        return None
    return upcoming


def notice_targets(settings: Settings, rules: policy.Policy | None) -> list[tuple[str, str]]:
    """(platform, channel) pairs where ``on_timeout.notify`` of a request's frozen
    ``rules`` posts its notice."""
    route = rules.route if rules is not None else None
    name = route.on_timeout.notify if route is not None and route.on_timeout else None
    target = rules.route_named(name, settings) if rules is not None and name else None
    if target is None:
        return []
    out = []
    for platform in target.platforms():
        section = target.section(platform)
        if section is not None and section.chat:
            out.append((platform, section.chat))
    return out


def queue_timeout_notices(ctx: EngineContext, session: Session, request_ids: list[int], *,
                          now: dt.datetime) -> int:
    """Queue ``on_timeout.notify`` notices for requests that just timed out, in the
    transaction that timed them out (so each is posted once, retried by the outbox).

    The notice is trusted words plus the request's title, passed through ``plain``
    (adapters escape it like any run output). Returns how many notices were queued."""
    settings = ctx.settings
    if not request_ids:
        return 0
    queued = 0
    # Only requests whose frozen rules mention ``notify`` (a cheap text pre-filter on
    # the stored policy, checked exactly below), and, while the live config has notices,
    # those stored before policies were frozen: 10k timeouts at once stay one sweep.
    may_notify: ColumnElement[bool] = cast(HumanRequest.policy, String).like('%"notify"%')
    if any(r.on_timeout and r.on_timeout.notify for r in settings.routes.values()):
        may_notify = or_(may_notify, HumanRequest.policy.is_(None))
    rows = session.execute(select(HumanRequest, Run.agent)
                           .join(Run, Run.id == HumanRequest.run_id)
                           .where(HumanRequest.id.in_(request_ids), may_notify)).all()
    for request, agent in rows:
        rules = policy.of(request, settings)  # frozen: a reload doesn't add or drop it
        route = rules.route if rules is not None else None
        targets = notice_targets(settings, rules)
        if not targets:
            continue
        text = notice_text(request, agent)
        for platform, channel in targets:
            outbox.enqueue(session, now, ctx.outbox_hold(), "post_run_result",
                           request_id=request.id, run_id=request.run_id, platform=platform,
                           payload={"channel": channel, "thread": None, "text": text,
                                    "notice": "timeout"})
            queued += 1
        store.audit(session, now, "timeout_notified", run_id=request.run_id, ref=request.ref,
                    details={"route": route.on_timeout.notify if route and route.on_timeout
                             else None, "copies": len(targets)})
    return queued


def notice_text(request: HumanRequest, agent: str) -> str:
    """"Timed out: no decision — …": what timed out, from whom, on which route."""
    args = request.args or {}
    subject = str(args.get("title") or args.get("question") or "a request")
    line = (f"Timed out: no decision. \"{truncate(subject, 150)}\" from {agent} on route "
            f"{request.route} got no answer by {when(request.deadline)}; nothing was approved "
            f"(ref {request.ref}).")
    return plain(" ".join(line.split()), 500)


def when(value: dt.datetime | None) -> str:
    moment = as_utc(value)
    return f"{moment:%Y-%m-%d %H:%M UTC}" if moment else "unknown"
