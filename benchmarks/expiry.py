"""10,000 requests whose deadline passes at once: how long until all are ``timeout``,
their card updates queued in the outbox and their resumes queued — and how much memory.

    .venv/bin/python benchmarks/expiry.py --requests 10000
    ASKHUMAN_TEST_POSTGRES_URL=postgresql+psycopg://… .venv/bin/python benchmarks/expiry.py

It uses the real engine (``Engine.expire_due``) on a fresh SQLite file and, when
``ASKHUMAN_TEST_POSTGRES_URL`` is set, on a fresh PostgreSQL database. Seeding is not
timed. Memory is the Python heap's peak during the sweep (tracemalloc) and the
process's RSS growth, both beyond what the seeded engine already held.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pg_scratch import scratch
from sqlalchemy import func, select

from storage import HumanRequest, OutboxItem, ResumeJob
from tests.engine.expiry_seed import seed
from tests.engine.helpers import make_engine


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def one_round(url: str, n: int, trace: bool) -> tuple[float, float, dict[str, int]]:
    engine, _, clock = make_engine(url)
    seed(engine.db, engine.now(), [(f"run{i}", None, 10) for i in range(n)])
    clock.advance(11 * 60)
    if trace:  # tracemalloc slows the sweep ~2x, so only the last round traces
        tracemalloc.start()
    start = time.perf_counter()
    expired = await engine.expire_due()
    took = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 2**20 if trace else 0.0
    tracemalloc.stop()
    with engine.db.transaction() as s:
        counts = {
            "expired": expired,
            "timeout": s.scalar(select(func.count()).select_from(HumanRequest)
                                .where(HumanRequest.status == "timeout")) or 0,
            "cards queued": s.scalar(select(func.count()).select_from(OutboxItem)
                                     .where(OutboxItem.kind == "update_card")) or 0,
            "resumes queued": s.scalar(select(func.count()).select_from(ResumeJob)) or 0,
        }
    engine.db.dispose()
    return took, peak, counts




def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    ns = parser.parse_args()
    backends = ["sqlite"] + (["postgres"] if os.environ.get("ASKHUMAN_TEST_POSTGRES_URL") else [])
    print("| backend | requests | median s | max s | heap peak MB | rows |")
    print("|---|---|---|---|---|---|")
    for backend in backends:
        times, peaks, counts = [], [], {}
        for i in range(ns.rounds + 1):
            trace = i == ns.rounds
            with tempfile.TemporaryDirectory() as tmp:
                if backend == "sqlite":
                    took, peak, counts = asyncio.run(
                        one_round(f"sqlite:///{tmp}/bench.db", ns.requests, trace))
                else:
                    base = os.environ["ASKHUMAN_TEST_POSTGRES_URL"]
                    with scratch(base) as url:
                        took, peak, counts = asyncio.run(one_round(url, ns.requests, trace))
            if trace:
                peaks.append(peak)
            else:
                times.append(took)
        assert set(counts.values()) == {ns.requests}, counts
        print(f"| {backend} | {ns.requests} | {statistics.median(times):.2f} | "
              f"{max(times):.2f} | {max(peaks):.1f} | {counts} |")
    print(f"process max RSS: {_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
