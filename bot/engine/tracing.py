"""Spans of a request's life, children of the trace context it was created with.

Off (the default, no SDK configured) every entry point returns at its first line
(``_tracer is None``), so the hot path pays a function call and a global read. On
(``use(provider)``: ``askhuman serve`` with the OpenTelemetry environment, see
``bot.otel``; tests pass an SDK provider with an in-memory exporter), the engine emits:

``askhuman.request.raised``
    the request was stored (``store.create_request``); ended when its transaction
    commits, never for one that rolled back.
``askhuman.request.delivered``
    one per platform message the card was posted as (``DeliveryHandlers``).
``askhuman.request.decided``
    the compare-and-set that resolved it (``store.resolve``: a click, a timeout, a
    cancel, a grant): the decider, the route, the outcome.
``askhuman.request.wait``
    created → resolved, with explicit start and end times (``created_at``,
    ``decided_at``) read from the row, so a restart in between loses nothing.
``askhuman.run.resumed``
    an embedded run's resume (``ResumeWorker``); the current span while the agent
    runs, so an instrumented agent's own spans nest under it.
``askhuman.webhook.sent``
    one per webhook attempt (``Webhooks``): the status code and the attempt; its
    context is the webhook's ``traceparent`` header.

Parents: the request's stored ``trace_context`` (``bot.engine.trace_context``): the
caller's ``traceparent``; with none, the request's own ``raised`` span, stored in
its place when the request is created, so every span of a request shares one trace.
Spans of a transaction are noted on its session (``note``) and ended by the
``Committer`` after the commit (``taken`` → ``emit``). Telemetry never fails the
work: an error while emitting is logged and dropped.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from sqlalchemy.orm import Session

from bot.engine.trace_context import as_headers

if TYPE_CHECKING:
    from storage import HumanRequest

log = logging.getLogger("askhuman.tracing")

NOTES_KEY = "askhuman.spans"
Note = Callable[[], None]
"""Ends a span once its transaction committed."""
Span = trace.Span

_tracer: trace.Tracer | None = None
_propagator = TraceContextTextMapPropagator()


def use(provider: trace.TracerProvider | None) -> None:
    """Emit spans through ``provider`` from now on (None: turn tracing off)."""
    global _tracer
    _tracer = provider.get_tracer("askhuman") if provider is not None else None


def on() -> bool:
    return _tracer is not None


def _parent(stored: Mapping[str, Any] | None) -> Any:
    """The OpenTelemetry context whose span is the stored ``traceparent`` (None: a root)."""
    return _propagator.extract(as_headers(stored)) if stored else None


def _ns(moment: dt.datetime) -> int:
    """Naive UTC (as stored) → nanoseconds since the epoch."""
    aware = moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
    return int(aware.timestamp() * 1_000_000_000)


def carrier(span: Span | None, stored: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Headers naming ``span`` as the parent; without one, the stored context as it came
    (tracing off: a receiver still joins the caller's trace)."""
    if span is None:
        return as_headers(stored)
    headers: dict[str, str] = {}
    _propagator.inject(headers, context=trace.set_span_in_context(span))
    return headers


# ------------------------------------------------------------------ after a commit

def note(session: Session, end: Note) -> None:
    session.info.setdefault(NOTES_KEY, []).append(end)


def taken(session: Session) -> list[Note]:
    """The spans this transaction noted (removed from the session)."""
    notes: list[Note] = session.info.pop(NOTES_KEY, None) or []
    return notes


def emit(notes: list[Note]) -> None:
    for end in notes:
        try:
            end()
        except Exception:
            log.warning("a span could not be emitted", exc_info=True)


def raised(session: Session, request: HumanRequest, agent: str) -> None:
    """``store.create_request``: the ``raised`` span; a request created with no trace
    context keeps this span's as its own, so its later spans join this trace."""
    if _tracer is None:
        return
    span = _tracer.start_span("askhuman.request.raised", context=_parent(request.trace_context),
                              attributes={"askhuman.request.ref": request.ref,
                                          "askhuman.route": request.route,
                                          "askhuman.agent": agent})
    if not request.trace_context:
        request.trace_context = carrier(span)

    def end() -> None:
        try:  # read at the commit: the door makes an approval of it after this call
            kind = request.kind
        except Exception:  # the row object is no longer readable: the span still ends
            kind = None
        span.set_attribute("askhuman.request.kind", kind or "ask_human")
        span.end()

    note(session, end)


def resolved(session: Session, request: HumanRequest, status: str, action: str | None,
             by: Any, now: dt.datetime) -> None:
    """``store.resolve`` won: the ``decided`` span and the whole ``wait``, emitted once
    the decision commits. ``by``: the decider's ``Identity`` (None: the system)."""
    if _tracer is None:
        return
    _resolution(session, Resolution(request.ref, request.route, request.kind,
                                    request.created_at, request.trace_context),
                status, action, by, now)


def timed_out(session: Session, rows: list[Resolution], status: str,
              action: str | None, now: dt.datetime) -> None:
    """The set-based timeout sweep (``expiry``) decided ``rows``: their spans, as above."""
    if _tracer is None:
        return
    for row in rows:
        _resolution(session, row, status, action, None, now)


@dataclass(frozen=True)
class Resolution:
    """What the spans of a resolved request need from its row."""

    ref: str
    route: str
    kind: str | None
    created_at: dt.datetime
    trace_context: Mapping[str, Any] | None


def _resolution(session: Session, row: Resolution, status: str, action: str | None,
                by: Any, now: dt.datetime) -> None:
    tracer, parent = _tracer, _parent(row.trace_context)
    assert tracer is not None
    common = {"askhuman.request.ref": row.ref, "askhuman.route": row.route,
              "askhuman.outcome": status}
    decider = f"{by.platform}:{by.user_id}" if by is not None else "system"
    decided: dict[str, Any] = {**common, "askhuman.decider": decider,
                               "askhuman.decider.platform": by.platform if by else "system"}
    if by is not None and by.display_name:
        decided["askhuman.decider.name"] = by.display_name
    if by is not None and by.via:
        decided["askhuman.decider.via"] = by.via
    if action:
        decided["askhuman.action"] = action
    started, created = time.time_ns(), _ns(row.created_at)
    waited = {**common, "askhuman.request.kind": row.kind or "ask_human"}

    def end() -> None:
        tracer.start_span("askhuman.request.decided", context=parent, attributes=decided,
                          start_time=started).end()
        tracer.start_span("askhuman.request.wait", context=parent, attributes=waited,
                          start_time=created).end(end_time=max(created, _ns(now)))

    note(session, end)


# ------------------------------------------------------------------ live spans

def start(name: str, stored: Mapping[str, Any] | None, attributes: Mapping[str, Any],
          client: bool = False) -> Span | None:
    """Start a span under the stored context (None when tracing is off)."""
    if _tracer is None:
        return None
    return _tracer.start_span(name, context=_parent(stored), attributes=dict(attributes),
                              kind=SpanKind.CLIENT if client else SpanKind.INTERNAL)


def finish(span: Span | None, error: BaseException | str | None = None,
           attributes: Mapping[str, Any] | None = None) -> None:
    """End ``span`` with its last attributes; an error marks it failed."""
    if span is None:
        return
    try:
        for key, value in (attributes or {}).items():
            if value is not None:
                span.set_attribute(key, value)
        if isinstance(error, BaseException):
            span.record_exception(error)
        if error is not None:
            span.set_status(StatusCode.ERROR, str(error)[:300])
        span.end()
    except Exception:
        log.warning("a span could not be ended", exc_info=True)


def current(span: Span | None) -> Any:
    """A context manager making ``span`` the current span (nothing when None)."""
    if span is None:
        return _NOTHING
    return trace.use_span(span, end_on_exit=False, record_exception=False,
                          set_status_on_exception=False)


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NOTHING = _Nothing()
