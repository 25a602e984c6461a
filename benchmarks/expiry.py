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
sweep came, and when its sweeps were done). It also reports the server's CPU seconds
(``/proc``, all threads) from 0.1 s before the deadline until all read ``timeout``
(the sweep), how many resumes and outbox rows it had begun by then (work competing
with the sweep) and, with ``--settle``, until every card update and resume it queued
is done (``harness.busy`` is 0: the whole cost of the 10,000 timeouts; minutes).
``--profile DIR`` runs ``py-spy record --format raw`` on the server over the sweep
(one file per round):

    .venv/bin/python benchmarks/expiry.py --served --requests 10000 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import signal
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




COLUMNS = ("deadline → all read `timeout` s", "→ first sweep s", "→ last `decided_at` s",
           "server CPU s, sweep", "resumes + outbox rows begun meanwhile",
           "server CPU s, until all done")


def served_round(n: int, lead: float, settle: bool, profile: Path | None = None
                 ) -> list[float]:
    """One ``serve`` on SQLite, ``n`` requests due ``lead`` s after they were seeded:
    seconds from their deadline until all read ``timeout`` here, to the first and the
    last ``decided_at`` the server wrote; the server's CPU seconds over the sweep; how
    many resumes and outbox rows it had begun by then; with ``settle``, its CPU seconds
    until everything the sweep queued is done (``COLUMNS``)."""
    import datetime as dt
    import subprocess

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
        spy = None
        if profile is not None:  # started early: py-spy takes a moment to attach
            spy = subprocess.Popen(["py-spy", "record", "--format", "raw", "--nonblocking",
                                    "-r", "200", "-p", str(app.pid), "-o",
                                    str(profile / f"expiry-{time.time_ns()}.txt")],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(wait - 0.1)
        cpu = h.cpu_seconds(app.pid)
        count = "SELECT count(*) FROM human_requests WHERE status = 'timeout'"
        while h.query(db_file, count)[0][0] < n:
            time.sleep(0.01)
        seen = time.monotonic() - due
        swept = h.cpu_seconds(app.pid) - cpu
        begun = sum(int(h.query(db_file, f"SELECT count(*) FROM {table} "
                                         "WHERE state != 'queued'")[0][0])
                    for table in ("resume_jobs", "outbox"))
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
            spy.wait(30)
        settled = float("nan")
        if settle:
            while h.busy(db_file):
                time.sleep(0.05)
            settled = h.cpu_seconds(app.pid) - cpu
        first, last = h.query(db_file, "SELECT min(decided_at), max(decided_at) "
                                       "FROM human_requests")[0]
        return [seen, (dt.datetime.fromisoformat(first) - deadline).total_seconds(),
                (dt.datetime.fromisoformat(last) - deadline).total_seconds(), swept,
                begun, settled]


def served(ns: argparse.Namespace) -> None:
    print("| round | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    rows = []
    for i in range(ns.rounds):
        rows.append(served_round(ns.requests, ns.lead, ns.settle, ns.profile))
        print(f"| {i + 1} | " + " | ".join(f"{v:.2f}" for v in rows[-1]) + " |",
              flush=True)
    print("| median | " + " | ".join(f"{statistics.median(r[k] for r in rows):.2f}"
                                      for k in range(len(COLUMNS))) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--served", action="store_true",
                        help="black box: a real `serve`, from the deadline to all `timeout`")
    parser.add_argument("--lead", type=float, default=8.0,
                        help="--served: seconds from seeding to the deadline")
    parser.add_argument("--settle", action="store_true",
                        help="--served: also wait until every resume and card update is "
                             "done (minutes) and report the server's CPU until then")
    parser.add_argument("--profile", type=Path,
                        help="--served: py-spy the server over each sweep, raw files here")
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
