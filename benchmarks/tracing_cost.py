"""What tracing costs a decision: CPU per request life with tracing off and on.

One "request life" is every call the engine makes into ``bot.engine.tracing`` for one
API request that is delivered to two platforms, decided, resumed and sent as a
webhook: ``raised``, two ``delivered`` spans, ``resolved`` (the ``decided`` and
``wait`` spans), the committer's ``taken``/``emit``, ``resumed`` and ``webhook.sent``
with its ``traceparent``. Each is run the way the engine runs it, on a real
SQLAlchemy session and a ``HumanRequest`` row object, so the figure is the tracing
code's own cost per decision, which the end-to-end benchmarks cannot resolve (their
run-to-run noise is larger than the off figure by three orders of magnitude).

* off: no provider (``tracing.use(None)``), the default;
* on: the SDK's ``TracerProvider`` with a ``BatchSpanProcessor`` (as ``serve`` builds
  it) to an in-memory exporter, so the export thread's CPU counts too.

    .venv/bin/python benchmarks/tracing_cost.py --lives 20000
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from sqlalchemy.orm import Session

from bot.engine import tracing
from bot.engine.ports import Identity
from storage import HumanRequest

TRACEPARENT = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
WHO = Identity("slack", "U0ALICE", "Alice")


def one_life(session: Session, request: HumanRequest, now: dt.datetime) -> None:
    """The tracing calls of one request's life, as the engine makes them."""
    tracing.raised(session, request, "ci-bot/deployer")
    tracing.emit(tracing.taken(session))  # Committer: the create's commit
    for platform in ("one", "two"):
        span = tracing.start("askhuman.request.delivered", request.trace_context, {
            "askhuman.request.ref": request.ref, "askhuman.platform": platform,
            "askhuman.target.kind": "channel", "askhuman.target.id": "C1",
            "askhuman.card.version": 1}, client=True)
        tracing.finish(span, attributes={"askhuman.message.channel": "C1",
                                         "askhuman.message.id": "1.2",
                                         "askhuman.message.reused": False})
    tracing.resolved(session, request, "submitted", "approve", WHO, now)
    tracing.emit(tracing.taken(session))  # Committer: the decision's commit
    span = tracing.start("askhuman.run.resumed", request.trace_context, {
        "askhuman.run.id": "r", "askhuman.agent": "deploy", "askhuman.request.ref": request.ref,
        "askhuman.resume.attempt": 1})
    with tracing.current(span):
        pass
    tracing.finish(span, None)
    span = tracing.start("askhuman.webhook.sent", request.trace_context, {
        "askhuman.request.ref": request.ref, "askhuman.webhook.id": "msg_x",
        "askhuman.webhook.attempt": 1, "http.request.method": "POST",
        "server.address": "hooks.example.com"}, client=True)
    tracing.carrier(span, request.trace_context)
    tracing.finish(span, attributes={"http.response.status_code": 200})


def measure(lives: int, flush: Callable[[], object] = lambda: None) -> float:
    """CPU microseconds per request life (all threads of this process), ``flush`` (the
    export of what the lives queued) included."""
    now = dt.datetime(2026, 12, 2, 10, 0, 0)
    request = HumanRequest(ref="ref", route="ops", kind="ask_human", created_at=now,
                           trace_context=dict(TRACEPARENT))
    with Session() as session:
        for _ in range(min(lives, 500)):  # warm up
            one_life(session, request, now)
        flush()
        start = time.process_time()
        for _ in range(lives):
            one_life(session, request, now)
        flush()
        return (time.process_time() - start) / lives * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lives", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    ns = parser.parse_args()
    tracing.use(None)
    off = min(measure(ns.lives) for _ in range(ns.rounds))
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=1 << 20))

    def flush() -> None:
        provider.force_flush()
        exporter.clear()

    tracing.use(provider)
    on = min(measure(max(1, ns.lives // 10), flush) for _ in range(ns.rounds))
    tracing.use(None)
    provider.shutdown()
    print("| tracing | spans per life | CPU µs per request life |")
    print("|---|---|---|")
    print(f"| off (no provider) | 0 | {off:.2f} |")
    print(f"| on (SDK, batch processor, in-memory exporter) | 7 | {on:.1f} |")


if __name__ == "__main__":
    main()
