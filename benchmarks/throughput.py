"""End-to-end decisions per second inside one engine, and answer → resume-start latency.

N runs of the scripted ``deploy`` agent wait for an answer; then N answers arrive at
once (``--in-flight`` at a time) while the engine's real worker loops run
(``serve_forever``): each answer is a compare-and-set decision, a card update through
the outbox, a resume of the agent and its final answer posted. Measured:

* decisions/s: N / (first answer sent → last final answer posted);
* answer → resume started: from the answer reaching the engine (``respond`` called)
  to the worker starting that run's resume (median and p99), with
  ``worker.resume_concurrency`` 1 (the old serial loop) and 4 (the default).
  ``--in-flight 1`` gives the idle figure.

The platform is the engine tests' in-memory fake adapter, so this measures the
engine and its database, not HTTP. ``ASKHUMAN_TEST_POSTGRES_URL`` adds PostgreSQL.

    .venv/bin/python benchmarks/throughput.py --runs 200
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

from pg_scratch import drop_database, scratch_database
from sqlalchemy import select

from bot.settings import WorkerSettings
from storage import HumanRequest
from tests.engine.helpers import ORIGIN, STARTER, alice, make_engine


def _p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


async def one_round(url: str, runs: int, in_flight: int, concurrency: int) -> dict[str, float]:
    engine, adapter, _ = make_engine(url)
    engine.settings = engine.settings.model_copy(
        update={"worker": WorkerSettings(resume_concurrency=concurrency)})
    for i in range(runs):
        await engine.start_run("deploy", f"Deploy v9.{i}", STARTER, ORIGIN)
    cards = [card for card, _ in adapter.delivered]
    with engine.db.transaction() as s:
        ids = {row[0]: row[1] for row in s.execute(select(HumanRequest.id, HumanRequest.ref))}
    started: dict[int, float] = {}
    process = engine._process

    async def timed_process(claim: Any, *args: Any) -> None:
        started[claim.request_id] = time.perf_counter()  # right after the claim commits
        await process(claim, *args)

    engine._process = timed_process  # type: ignore[method-assign]
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

    begin = time.perf_counter()
    await asyncio.gather(*(answer(card) for card in cards))
    while len(adapter.results) < runs:
        await asyncio.sleep(0.01)
    elapsed = time.perf_counter() - begin
    stop.set()
    await worker
    engine.db.dispose()
    waits = [(started[i] - answered[ref]) * 1000 for i, ref in ids.items()]
    return {"decisions/s": runs / elapsed, "p50 ms": statistics.median(waits),
            "p99 ms": _p(waits, 0.99)}




def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--in-flight", type=int, default=100)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4],
                        help="worker.resume_concurrency values to run (one row each)")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], nargs="+",
                        default=["sqlite", "postgres"])
    ns = parser.parse_args()
    base = os.environ.get("ASKHUMAN_TEST_POSTGRES_URL")
    print("| backend | resume_concurrency | decisions/s | answer→resume p50 ms | p99 ms |")
    print("|---|---|---|---|---|")
    for backend in [b for b in ns.backend if b == "sqlite" or base]:
        for concurrency in ns.concurrency:
            with tempfile.TemporaryDirectory() as tmp:
                if backend == "sqlite":
                    row = asyncio.run(one_round(f"sqlite:///{tmp}/b.db", ns.runs,
                                                ns.in_flight, concurrency))
                else:
                    assert base is not None
                    url, name = scratch_database(base)
                    try:
                        row = asyncio.run(one_round(url, ns.runs, ns.in_flight, concurrency))
                    finally:
                        drop_database(base, name)
            print(f"| {backend} | {concurrency} | {row['decisions/s']:.0f} | "
                  f"{row['p50 ms']:.0f} | {row['p99 ms']:.0f} |")


if __name__ == "__main__":
    main()
