"""Prometheus metrics (``/metrics``, off unless ``metrics: {enabled: true}``).

Two kinds. What the database knows is computed at scrape time, so every replica
reports the same truth and nothing is lost on restart: pending requests per route
(how many, the oldest's age, how many already escalated, how late an escalation step
is), decisions by outcome, platform and route, resume jobs and outbox rows that failed
for good, the outbox backlog and the age of its oldest row. What only happens in a
process is observed where it happens (histograms and counters of this replica): time
to decision, click → ack, answer → resume, resume failures (each failed attempt),
platform API calls by method and status, their retries, and Slack clicks by the
path they came in by (askhuman's fast path or Bolt).

The process-wide metric objects are not registered globally; each served app builds
its own registry (``registry_for``), so tests and several apps in one process don't
collide.

Under ``serve --workers N`` a scrape is answered by whichever worker accepts it, so the
process metrics use prometheus_client's multiprocess mode there: the arbiter, before it
forks, switches the value class to one that writes each value to a per-process file in
one directory (``use_multiprocess``), and every worker's ``/metrics`` sums all those
files (``MultiProcessCollector``), the files of dead workers included, so a counter
never goes back when a worker dies or is replaced. One process (``serve``, ``askhuman
worker``) keeps plain in-memory values and needs no directory.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, values
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from sqlalchemy.orm import Session
    from starlette.requests import Request
    from starlette.responses import Response

    from storage import Database

LATENCY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0)
DECISION_BUCKETS = (10, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 86400,
                    3 * 86400, 7 * 86400)

ProcessMetrics = tuple[Histogram, Histogram, Histogram, Counter, Counter, Counter, Counter]


def _define() -> ProcessMetrics:
    """The process metrics, made with prometheus_client's value class of the moment
    (in memory, or one file per process in multiprocess mode)."""
    return (
        Histogram("askhuman_time_to_decision_seconds", "From request created to decided.",
                  ["route", "outcome"], buckets=DECISION_BUCKETS, registry=None),
        Histogram("askhuman_click_ack_seconds", "From a click arriving to it being stored "
                  "(the ack follows immediately).", ["platform"], buckets=LATENCY_BUCKETS,
                  registry=None),
        Histogram("askhuman_answer_to_resume_seconds",
                  "From the decision to the resume starting.", buckets=LATENCY_BUCKETS,
                  registry=None),
        Counter("askhuman_resume_failures",
                "Resume attempts that failed (retried or given up).", ["agent"],
                registry=None),
        Counter("askhuman_platform_api_calls", "Platform API calls by method and status.",
                ["platform", "method", "status"], registry=None),
        Counter("askhuman_platform_api_retries", "Platform API calls retried.",
                ["platform", "method"], registry=None),
        Counter("askhuman_slack_clicks", "Slack card clicks (approve, reject, any action "
                "button) taken in, by path: fast (askhuman's own block_actions path) or bolt "
                "(slack-bolt).", ["path"], registry=None),
    )


PROCESS_METRICS = _define()
(TIME_TO_DECISION, CLICK_ACK, ANSWER_TO_RESUME, RESUME_FAILURES, PLATFORM_CALLS,
 PLATFORM_RETRIES, SLACK_CLICKS) = PROCESS_METRICS
_multiprocess_dir: str | None = None
"""Set in the arbiter of ``serve --workers N`` (``use_multiprocess``); its forks inherit it."""


def use_multiprocess(directory: str) -> None:
    """Switch this process, and the workers it will fork, to multiprocess mode on
    ``directory`` (emptied by the caller; named in ``PROMETHEUS_MULTIPROC_DIR``, where
    prometheus_client looks when a process opens its files).

    prometheus_client picks its value class when it is imported, from that variable,
    and the engine imports it long before the arbiter knows it will fork; so this sets
    the class as prometheus_client's multiprocess module documents for a custom process
    identifier (``values.ValueClass = values.MultiProcessValue()``; here the default,
    ``os.getpid``) and makes the metric objects again, since an unlabelled one holds its
    value from birth. Each fork notices its new pid at its first observation and writes
    its own files."""
    global PROCESS_METRICS, TIME_TO_DECISION, CLICK_ACK, ANSWER_TO_RESUME
    global RESUME_FAILURES, PLATFORM_CALLS, PLATFORM_RETRIES, SLACK_CLICKS, _multiprocess_dir
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    values.ValueClass = values.MultiProcessValue()  # type: ignore[no-untyped-call]
    PROCESS_METRICS = _define()
    (TIME_TO_DECISION, CLICK_ACK, ANSWER_TO_RESUME, RESUME_FAILURES, PLATFORM_CALLS,
     PLATFORM_RETRIES, SLACK_CLICKS) = PROCESS_METRICS
    _multiprocess_dir = directory


def multiprocess_dir() -> str | None:
    """The directory every worker's metrics are summed from, or None (one process)."""
    return _multiprocess_dir


def observe_decision(route: str, outcome: str, created: dt.datetime,
                     decided: dt.datetime) -> None:
    TIME_TO_DECISION.labels(route, outcome).observe(
        max((decided - created).total_seconds(), 0.0))


def observe_decisions(outcome: str, decided: dt.datetime,
                      requests: Iterable[tuple[str, dt.datetime]]) -> None:
    """``observe_decision`` for many requests decided at once, ``(route, created)``
    each (a timeout sweep's chunk): the labelled histogram is looked up once per route,
    not once per request (half of ``observe_decision``'s ~2.3 µs)."""
    ages: dict[str, list[float]] = {}
    for route, created in requests:
        ages.setdefault(route, []).append(max((decided - created).total_seconds(), 0.0))
    for route, seconds in ages.items():
        histogram = TIME_TO_DECISION.labels(route, outcome)
        for value in seconds:
            histogram.observe(value)


def observe_click_stored(platform: str, seconds: float) -> None:
    CLICK_ACK.labels(platform).observe(max(seconds, 0.0))


def observe_resume(decided: dt.datetime | None, now: dt.datetime) -> None:
    if decided is not None:
        ANSWER_TO_RESUME.observe(max((now - decided).total_seconds(), 0.0))


def resume_failed(agent: str) -> None:
    RESUME_FAILURES.labels(agent).inc()


def platform_call(platform: str, method: str, status: str) -> None:
    PLATFORM_CALLS.labels(platform, method, status).inc()


def platform_retry(platform: str, method: str) -> None:
    PLATFORM_RETRIES.labels(platform, method).inc()


def slack_click(path: str) -> None:
    SLACK_CLICKS.labels(path).inc()


class DatabaseCollector(Collector):
    """Gauges and counters read from the shared database at scrape time."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def collect(self) -> Iterator[Metric]:
        now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        with self.database.read() as session:
            yield from _pending_families(session, now)
            yield from _settled_families(session, now)


def _pending_families(session: Session, now: dt.datetime) -> Iterator[Metric]:
    """Per route, in one grouped query over the pending rows: how many, how old the
    oldest is, how many already escalated and still unanswered, and how late the most
    overdue escalation step not yet taken is (an alert can't know each route's
    ``escalation.after``; these say "waited past it" without it)."""
    from sqlalchemy import case, func, select

    from storage import HumanRequest

    labels = ["route"]
    pending = GaugeMetricFamily("askhuman_pending_requests",
                                "Requests waiting for people, per route.", labels=labels)
    oldest = GaugeMetricFamily("askhuman_pending_oldest_age_seconds",
                               "Age of the oldest pending request, per route.", labels=labels)
    escalated = GaugeMetricFamily(
        "askhuman_pending_escalated_requests", "Pending requests already escalated (they "
        "waited past their escalation time and are still unanswered), per route.",
        labels=labels)
    overdue = GaugeMetricFamily(
        "askhuman_pending_escalation_overdue_seconds", "How long past due the most overdue "
        "escalation step not yet taken is (0: none due; more than a sweep interval: "
        "escalation is not running), per route.", labels=labels)
    due = HumanRequest.escalate_at <= now
    rows = session.execute(
        select(HumanRequest.route, func.count(), func.min(HumanRequest.created_at),
               func.count(HumanRequest.escalated_at),
               func.min(case((due, HumanRequest.escalate_at))))
        .where(HumanRequest.status == "pending").group_by(HumanRequest.route))
    for route, count, first, reached, late in rows:
        pending.add_metric([route], count)
        oldest.add_metric([route], _age(now, first))
        escalated.add_metric([route], reached)
        overdue.add_metric([route], _age(now, late))
    yield from (pending, oldest, escalated, overdue)


def _settled_families(session: Session, now: dt.datetime) -> Iterator[Metric]:
    """Decisions so far, resume jobs and outbox rows given up, and the outbox backlog."""
    from sqlalchemy import func, select

    from storage import HumanRequest, OutboxItem, ResumeJob

    decisions = CounterMetricFamily("askhuman_decisions",
                                    "Decided requests by outcome, deciding platform and route.",
                                    labels=["outcome", "platform", "route"])
    failed = GaugeMetricFamily("askhuman_resume_jobs_failed",
                               "Resume jobs that gave up (need an operator).")
    undelivered = GaugeMetricFamily(
        "askhuman_outbox_failed", "Outbox rows that gave up: side effects (cards, updates, "
        "run results) a platform never saw, by kind.", labels=["kind"])
    backlog = GaugeMetricFamily("askhuman_outbox_backlog",
                                "Outbox rows not done yet (queued or running).")
    oldest = GaugeMetricFamily("askhuman_outbox_oldest_age_seconds",
                               "Age of the oldest outbox row not done yet.")
    for status, platform, route, count in session.execute(
            select(HumanRequest.status, HumanRequest.decided_by_platform, HumanRequest.route,
                   func.count())
            .where(HumanRequest.status != "pending")
            .group_by(HumanRequest.status, HumanRequest.decided_by_platform,
                      HumanRequest.route)):
        decisions.add_metric([status, platform or "system", route], count)
    failed.add_metric([], session.scalar(select(func.count()).select_from(ResumeJob)
                                         .where(ResumeJob.state == "failed")) or 0)
    for kind, count in session.execute(
            select(OutboxItem.kind, func.count()).where(OutboxItem.state == "failed")
            .group_by(OutboxItem.kind)):
        undelivered.add_metric([kind], count)
    open_rows = OutboxItem.state.in_(("queued", "running"))
    backlog.add_metric([], session.scalar(select(func.count()).select_from(OutboxItem)
                                          .where(open_rows)) or 0)
    first = session.scalar(select(func.min(OutboxItem.created_at)).where(open_rows))
    oldest.add_metric([], _age(now, first))
    yield from (decisions, failed, undelivered, backlog, oldest)


def _age(now: dt.datetime, since: dt.datetime | None) -> float:
    return max((now - since).total_seconds(), 0.0) if since is not None else 0.0


def registry_for(database: Database, extra: Iterable[Collector] = ()) -> CollectorRegistry:
    """What ``/metrics`` serves: the process metrics (this process's own, or in
    multiprocess mode every worker's summed from their files: then the metric objects
    themselves are not registered, or this worker's share would be counted twice), and
    the families read from the database at scrape time (the same whichever worker
    answers, so they stay out of the files)."""
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry(auto_describe=False)
    if _multiprocess_dir is not None:
        MultiProcessCollector(registry, path=_multiprocess_dir)  # type: ignore[no-untyped-call]
    else:
        for metric in PROCESS_METRICS:
            registry.register(metric)
    registry.register(DatabaseCollector(database))
    for collector in extra:
        registry.register(collector)
    return registry


def endpoint(registry: CollectorRegistry) -> Callable[[Request], Awaitable[Response]]:
    """A Starlette endpoint serving ``registry`` in the Prometheus text format."""
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import Response

    async def metrics(_request: Request) -> Response:
        body = await run_in_threadpool(generate_latest, registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return metrics
