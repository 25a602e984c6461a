"""CPU and SQL statements per resume, on the engine's own resume path.

N runs of the scripted ``deploy`` agent are started and answered first; then the
resume queue is drained with ``worker.resume_concurrency`` slots
(``engine.resumes.due``): claim -> read -> pydantic-ai resume -> commit of the outcome
-> final answer posted. Measured over that drain only: process CPU time per resume
(median of ``--reps`` rounds; split into the event-loop thread, where the agent runs,
and the other threads, where the database work runs) and SQL statements per resume.
CPU time is robust to a shared machine in a way wall time is not.
``--instant-resume`` replaces the pydantic-ai run with one that finishes at once: the
engine's share alone. ``--count-calls`` also counts the Python function calls per resume
on the event-loop thread (cProfile, one extra round): unlike CPU time it does not drift
with a shared machine, so it compares two trees exactly.

    .venv/bin/python benchmarks/resume_cost.py --runs 200 --concurrency 16
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import event
from throughput import waiting_runs

from bot.engine import heap
from tests.engine.helpers import alice


async def one_round(url: str, runs: int, concurrency: int, instant: bool,
                    profile: cProfile.Profile | None = None) -> dict[str, float]:
    engine, adapter = await waiting_runs(url, runs, concurrency, instant)
    for card, _ in list(adapter.delivered):
        answer = await engine.respond(card.ref, alice(), "approve", {"environment": "staging"})
        assert answer.outcome == "accepted", answer.message
    await engine.drain()
    heap.freeze_startup_heap()  # as serve_forever does
    sent = [0]

    def count(*_args: Any) -> None:
        sent[0] += 1

    event.listen(engine.db.engine, "before_cursor_execute", count)
    cpu, main = time.process_time(), time.thread_time()
    if profile is not None:
        profile.enable()
    assert await engine.resumes.due(runs, concurrency) == runs
    await engine.drain()
    if profile is not None:
        profile.disable()
    cpu, main = time.process_time() - cpu, time.thread_time() - main
    event.remove(engine.db.engine, "before_cursor_execute", count)
    assert len(adapter.results) == runs
    engine.db.dispose()
    return {"cpu": cpu / runs * 1000, "main": main / runs * 1000,
            "statements": sent[0] / runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--instant-resume", action="store_true")
    parser.add_argument("--count-calls", action="store_true")
    ns = parser.parse_args()
    rows = []
    for _ in range(ns.reps):
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(asyncio.run(one_round(f"sqlite:///{tmp}/r.db", ns.runs,
                                              ns.concurrency, ns.instant_resume)))
    med = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
    print("| CPU ms/resume | event-loop thread | other threads | statements/resume |")
    print("|---|---|---|---|")
    print(f"| {med['cpu']:.2f} | {med['main']:.2f} | {med['cpu'] - med['main']:.2f} | "
          f"{med['statements']:.2f} |")
    if ns.count_calls:
        profile = cProfile.Profile()
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(one_round(f"sqlite:///{tmp}/r.db", ns.runs, ns.concurrency,
                                  ns.instant_resume, profile))
        calls = pstats.Stats(profile).total_calls / ns.runs  # type: ignore[attr-defined]
        print(f"function calls per resume, event-loop thread: {calls:.0f}")


if __name__ == "__main__":
    main()
