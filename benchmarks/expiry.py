"""10,000 requests whose deadline passes at once: how long until all are ``timeout``,
their card updates queued in the outbox and their resumes queued — and how much memory.

    .venv/bin/python benchmarks/expiry.py --requests 10000
    ASKHUMAN_TEST_POSTGRES_URL=postgresql+psycopg://… .venv/bin/python benchmarks/expiry.py

It uses the real engine (``Engine.expire_due``) on a fresh SQLite file and, when
``ASKHUMAN_TEST_POSTGRES_URL`` is set, on a fresh PostgreSQL database. Seeding is not
timed. Memory is the Python heap's peak during the sweep (tracemalloc) and the
process's RSS growth, both beyond what the seeded engine already held.

``--served`` measures it black box instead: the real ``askhuman serve`` in its own
process (SQLite, every worker loop running, Slack faked), the requests seeded into
its database while it runs with a deadline ``--lead`` seconds ahead; the time is from
that deadline until this process reads all of them as ``timeout``, and from the
deadline to the first and the last ``decided_at`` the server wrote (when its first
sweep came, and when its sweeps were done):

    .venv/bin/python benchmarks/expiry.py --served --requests 10000 --rounds 3
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




def served_round(n: int, lead: float) -> tuple[float, float, float]:
    """One ``serve`` on SQLite, ``n`` requests due ``lead`` s after they were seeded:
    seconds from their deadline until all read ``timeout`` here, and to the first and
    the last ``decided_at`` the server wrote."""
    import datetime as dt

    import harness as h
    import yaml
    from sqlalchemy import update

    from storage import Database
    from tests.fakes.slack_api import BOT_TOKEN

    with tempfile.TemporaryDirectory() as tmp, h.Parties(Path(tmp)) as parties:
        db_file = Path(tmp) / "askhuman.db"
        url = f"sqlite:///{db_file}"
        config = Path(tmp) / "askhuman.yaml"
        config.write_text(yaml.safe_dump({
            "database_url": url, "agents": {"deploy": {"model": "scripted:deploy",
                                                      "route": "ops"}},
            "routes": {"ops": {"timeout": "30m", "slack": {
                "channel": "C0BENCH", "approvers": {"users": ["U00000"]}}}}}))
        ready = Path(tmp) / "slack.ready"
        fake = parties.role("slack_ack.py", "fake", "--port", str(h.free_port()),
                            "--clicks", "1", "--ready", str(ready), name="fake slack")
        app = parties.askhuman(config, h.free_port(), {
            "SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": "s",
            "SLACK_API_URL": h.wait_file(fake, ready)})
        h.wait_http(app)
        time.sleep(1.0)  # past startup: the loops are idling at their poll interval
        db = Database(url)
        now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        deadline = now + dt.timedelta(seconds=lead)
        seed(db, now, [(f"run{i}", None, None) for i in range(n)])
        with db.transaction() as s:
            s.execute(update(HumanRequest).values(deadline=deadline))
        db.dispose()
        wait = (deadline - dt.datetime.now(dt.UTC).replace(tzinfo=None)).total_seconds()
        assert wait > 0.2, "seeding took longer than --lead"
        due = time.monotonic() + wait
        time.sleep(wait - 0.1)
        count = "SELECT count(*) FROM human_requests WHERE status = 'timeout'"
        while h.query(db_file, count)[0][0] < n:
            time.sleep(0.01)
        seen = time.monotonic() - due
        first, last = h.query(db_file, "SELECT min(decided_at), max(decided_at) "
                                       "FROM human_requests")[0]
        return (seen, (dt.datetime.fromisoformat(first) - deadline).total_seconds(),
                (dt.datetime.fromisoformat(last) - deadline).total_seconds())


def served(ns: argparse.Namespace) -> None:
    print("| round | deadline → all read `timeout` s | → first sweep s | → last "
          "`decided_at` s |\n|---|---|---|---|")
    rows = []
    for i in range(ns.rounds):
        rows.append(served_round(ns.requests, ns.lead))
        print(f"| {i + 1} | {rows[-1][0]:.2f} | {rows[-1][1]:.2f} | {rows[-1][2]:.2f} |",
              flush=True)
    print(f"| median | {statistics.median(r[0] for r in rows):.2f} | "
          f"{statistics.median(r[1] for r in rows):.2f} | "
          f"{statistics.median(r[2] for r in rows):.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--served", action="store_true",
                        help="black box: a real `serve`, from the deadline to all `timeout`")
    parser.add_argument("--lead", type=float, default=8.0,
                        help="--served: seconds from seeding to the deadline")
    ns = parser.parse_args()
    if ns.served:
        served(ns)
        return
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
