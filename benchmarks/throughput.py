"""End-to-end decisions per second inside one engine, and answer → resume-start latency.

N runs of the scripted ``deploy`` agent wait for an answer; then N answers arrive at
once (``--in-flight`` at a time) while the engine's real worker loops run
(``serve_forever``): each answer is a compare-and-set decision, a card update through
the outbox, a resume of the agent and its final answer posted. Measured:

* decisions/s: N / (first answer sent → last final answer posted), and the CPU time
  this process (all its threads) spent per decision meanwhile;
* answer → resume started: from the answer reaching the engine (``respond`` called)
  to the worker starting that run's resume, i.e. right after the transaction that
  claimed its job (median and p99), for each ``--concurrency`` value of
  ``worker.resume_concurrency``. ``--in-flight 1`` gives the idle figure;
* decided → resume started: from the decision (in its transaction) to the same
  point: the resume queue's own wait, without the answers queued ahead of it;
* answer → resume done: from the answer to that resume's outcome committed (its
  final answer queued): what the agent waits for. More resume slots start resumes
  sooner, and then they share the CPU (one process).

The platform is the engine tests' in-memory fake adapter, so this measures the
engine and its database, not HTTP. ``ASKHUMAN_TEST_POSTGRES_URL`` adds PostgreSQL;
``--replicas 2`` runs the PostgreSQL rows as two replica processes on one database,
each serving and answering half of the requests. ``--instant-resume`` replaces the
pydantic-ai run behind each resume with one that finishes at once (the engine alone).

    .venv/bin/python benchmarks/throughput.py --runs 200
    .venv/bin/python benchmarks/throughput.py --backend postgres --replicas 2 --concurrency 16
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pg_scratch import scratch
from sqlalchemy import select

from bot.settings import WorkerSettings
from storage import HumanRequest
from tests.engine.helpers import ORIGIN, STARTER, alice, make_engine


def _p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


class InstantResume:
    """The ``deploy`` agent's first leg as scripted, and a resume that finishes at once:
    the engine's own cost, without the pydantic-ai run behind each resume
    (``--instant-resume``)."""

    def __init__(self, real: Any) -> None:
        self._real = real

    async def run(self, prompt: str, **kwargs: Any) -> Any:
        return await self._real.run(prompt, **kwargs)

    async def resume(self, snapshot: dict[str, Any], results: dict[str, Any],
                     **kwargs: Any) -> Any:
        from bot.agents.base import Outcome

        return Outcome.finished("Deployed.", {**snapshot, "done": True})


INSTANT = False
"""Set by ``--instant-resume``."""


async def waiting_runs(url: str, runs: int, concurrency: int, instant: bool
                       ) -> tuple[Any, Any]:
    """An engine with ``worker.resume_concurrency = concurrency`` (and the instant resume
    if asked) and ``runs`` started ``deploy`` runs waiting for an answer; and its fake
    adapter, which holds their cards."""
    engine, adapter, _ = make_engine(url)
    engine.settings = engine.settings.model_copy(
        update={"worker": WorkerSettings(resume_concurrency=concurrency)})
    if instant:
        engine.runtimes.built["deploy"] = InstantResume(engine.runtimes.get("deploy"))
    for i in range(runs):
        await engine.start_run("deploy", f"Deploy v9.{i}", STARTER, ORIGIN)
    return engine, adapter


async def one_round(url: str, runs: int, in_flight: int, concurrency: int) -> dict[str, float]:
    engine, adapter = await waiting_runs(url, runs, concurrency, INSTANT)
    cards = [card for card, _ in adapter.delivered]
    with engine.db.transaction() as s:
        ids = {row[0]: row[1] for row in s.execute(select(HumanRequest.id, HumanRequest.ref))}
    started: dict[int, float] = {}
    finished: dict[int, float] = {}
    process = engine.resumes.process

    async def timed_process(claim: Any, *args: Any, **kwargs: Any) -> None:
        started[claim.request_id] = time.perf_counter()  # right after the claim commits
        await process(claim, *args, **kwargs)
        finished[claim.request_id] = time.perf_counter()  # its outcome committed

    engine.resumes.process = timed_process  # type: ignore[method-assign]
    decided = _time_decisions(engine, time.perf_counter)
    stop = asyncio.Event()
    worker = asyncio.create_task(engine.serve_forever(stop, poll_interval=2.0))
    await asyncio.sleep(0.2)
    answered: dict[str, float] = {}
    gate = asyncio.Semaphore(in_flight)

    async def answer(card: Any) -> None:
        async with gate:
            answered[card.ref] = time.perf_counter()  # the click arrives
            result = await engine.respond(card.ref, alice(), "approve",
                                          {"environment": "staging"})
            assert result.outcome == "accepted", result.message

    begin, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(answer(card) for card in cards))
    while len(adapter.results) < runs:
        await asyncio.sleep(0.01)
    elapsed = time.perf_counter() - begin
    cpu_ms = (time.process_time() - cpu) / runs * 1000  # every thread of this process
    stop.set()
    await worker
    engine.db.dispose()
    waits = [(started[i] - answered[ref]) * 1000 for i, ref in ids.items()]
    queued = [(started[i] - decided[ref]) * 1000 for i, ref in ids.items()]
    done = [(finished[i] - answered[ref]) * 1000 for i, ref in ids.items()]
    return {"decisions/s": runs / elapsed, "p50 ms": statistics.median(waits),
            "p99 ms": _p(waits, 0.99), "queued p50 ms": statistics.median(queued),
            "queued p99 ms": _p(queued, 0.99), "done p50 ms": statistics.median(done),
            "done p99 ms": _p(done, 0.99), "cpu ms": cpu_ms}


def _time_decisions(engine: Any, clock: Any) -> dict[str, float]:
    """When each accepted decision was made (in its transaction, just before the commit
    it shares with the rest of its batch): the start of the resume queue's wait."""
    decided: dict[str, float] = {}
    decide = engine.decider.decide

    def timed(session: Any, ref: str, *args: Any, **kwargs: Any) -> Any:
        answer = decide(session, ref, *args, **kwargs)
        if answer.outcome == "accepted":
            decided[ref] = clock()
        return answer

    engine.decider.decide = timed
    return decided


async def _replica(url: str, refs: list[str], concurrency: int, in_flight: int,
                   go_at: float, stop: Any) -> dict[str, Any]:
    """One replica: serve (resumes, outbox, NOTIFY) and answer ``refs`` from ``go_at``."""
    engine, _, _ = make_engine(url)
    engine.settings = engine.settings.model_copy(
        update={"worker": WorkerSettings(resume_concurrency=concurrency)})
    started: dict[int, float] = {}
    process = engine.resumes.process

    async def timed_process(claim: Any, *args: Any, **kwargs: Any) -> None:
        started[claim.request_id] = time.time()
        await process(claim, *args, **kwargs)

    engine.resumes.process = timed_process  # type: ignore[method-assign]
    decided = _time_decisions(engine, time.time)
    done = asyncio.Event()
    worker = asyncio.create_task(engine.serve_forever(done, poll_interval=2.0))
    await asyncio.sleep(max(0.0, go_at - time.time()))
    answered: dict[str, float] = {}
    gate = asyncio.Semaphore(in_flight)

    async def answer(ref: str) -> None:
        async with gate:
            answered[ref] = time.time()
            result = await engine.respond(ref, alice(), "approve", {"environment": "staging"})
            assert result.outcome == "accepted", result.message

    await asyncio.gather(*(answer(ref) for ref in refs))
    while not stop.is_set():
        await asyncio.sleep(0.02)
    done.set()
    await worker
    engine.db.dispose()
    return {"answered": answered, "decided": decided, "started": started}


def _replica_process(url: str, refs: list[str], concurrency: int, in_flight: int,
                     go_at: float, stop: Any, out: Any) -> None:
    out.put(asyncio.run(_replica(url, refs, concurrency, in_flight, go_at, stop)))


def replicas_round(url: str, runs: int, in_flight: int, concurrency: int,
                   replicas: int) -> dict[str, float]:
    """``replicas`` processes on one PostgreSQL database, each serving and answering its
    share of the requests (``in_flight`` at a time per replica); done when every final
    answer is posted (its ``post_run_result`` outbox row is done)."""
    import multiprocessing

    from sqlalchemy import func

    from storage import OutboxItem

    engine, adapter, _ = make_engine(url)

    async def seed() -> None:
        for i in range(runs):
            await engine.start_run("deploy", f"Deploy v9.{i}", STARTER, ORIGIN)

    asyncio.run(seed())
    refs = [card.ref for card, _ in adapter.delivered]
    with engine.db.transaction() as s:
        ids = {row[0]: row[1] for row in s.execute(select(HumanRequest.id, HumanRequest.ref))}
    context = multiprocessing.get_context("spawn")
    stop, out = context.Event(), context.Queue()
    go_at = time.time() + 4.0  # every replica is up and listening by then
    children = [context.Process(target=_replica_process, args=(
        url, refs[k::replicas], concurrency, in_flight, go_at, stop, out))
        for k in range(replicas)]
    for child in children:
        child.start()
    posted = (select(func.count()).select_from(OutboxItem)
              .where(OutboxItem.kind == "post_run_result", OutboxItem.state == "done"))
    while True:
        with engine.db.read() as s:
            if int(s.scalar(posted) or 0) >= runs:
                break
        time.sleep(0.01)
    elapsed = time.time() - go_at
    stop.set()
    parts = [out.get(timeout=60) for _ in children]
    for child in children:
        child.join(60)
    engine.db.dispose()
    merged: dict[str, dict[Any, float]] = {"answered": {}, "decided": {}, "started": {}}
    for part in parts:
        for key in merged:
            merged[key].update(part[key])
    answered, decided, started = merged["answered"], merged["decided"], merged["started"]
    waits = [(started[i] - answered[ref]) * 1000 for i, ref in ids.items()]
    queued = [(started[i] - decided[ref]) * 1000 for i, ref in ids.items()]
    return {"decisions/s": runs / elapsed, "p50 ms": statistics.median(waits),
            "p99 ms": _p(waits, 0.99), "queued p50 ms": statistics.median(queued),
            "queued p99 ms": _p(queued, 0.99)}




def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--in-flight", type=int, default=100)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4],
                        help="worker.resume_concurrency values to run (one row each)")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], nargs="+",
                        default=["sqlite", "postgres"])
    parser.add_argument("--replicas", type=int, default=1,
                        help="PostgreSQL: replica processes sharing the in-flight answers")
    parser.add_argument("--instant-resume", action="store_true",
                        help="resumes finish at once (no pydantic-ai run): the engine alone")
    parser.add_argument("--otel", action="store_true",
                        help="tracing on: the SDK with a batch processor to an in-memory "
                             "exporter (docs/tracing.md); off by default, as in serve")
    ns = parser.parse_args()
    if ns.otel:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        from bot.engine import tracing

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
        tracing.use(provider)
    global INSTANT
    INSTANT = ns.instant_resume
    base = os.environ.get("ASKHUMAN_TEST_POSTGRES_URL")
    print("| backend | replicas | resume_concurrency | decisions/s | CPU ms/decision "
          "| answer→resume p50 ms | p99 ms | decided→resume p50 ms | p99 ms "
          "| answer→resume done p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for backend in [b for b in ns.backend if b == "sqlite" or base]:
        replicas = ns.replicas if backend == "postgres" else 1
        for concurrency in ns.concurrency:
            with tempfile.TemporaryDirectory() as tmp:
                if backend == "sqlite":
                    row = asyncio.run(one_round(f"sqlite:///{tmp}/b.db", ns.runs,
                                                ns.in_flight, concurrency))
                else:
                    assert base is not None
                    with scratch(base) as url:
                        row = (asyncio.run(one_round(url, ns.runs, ns.in_flight, concurrency))
                               if replicas == 1 else
                               replicas_round(url, ns.runs, ns.in_flight // replicas,
                                              concurrency, replicas))
            cpu = f"{row['cpu ms']:.1f}" if "cpu ms" in row else "n/a (processes)"
            done = (f"{row['done p50 ms']:.0f} | {row['done p99 ms']:.0f}"
                    if "done p50 ms" in row else "n/a | n/a")
            print(f"| {backend} | {replicas} | {concurrency} | {row['decisions/s']:.0f} | "
                  f"{cpu} | {row['p50 ms']:.0f} | {row['p99 ms']:.0f} | "
                  f"{row['queued p50 ms']:.0f} | {row['queued p99 ms']:.0f} | {done} |")


if __name__ == "__main__":
    main()
