"""CPU of askhuman's process metrics: in memory (one process) vs prometheus_client's
multiprocess files (``serve --workers N``, ``bot.metrics.use_multiprocess``).

Each mode runs in a fresh interpreter (the mode is chosen once per process), in turn,
``--rounds`` times: the CPU (``time.thread_time``) of one decision's observations (a
click counted and its ack timed, the decision timed, two platform calls, a resume
timed), and of one scrape of the process metrics with the files of ``--workers``
forked processes that each observed once (the database families are left out: they
cost the same either way).

    .venv/bin/python benchmarks/metrics_cost.py --rounds 5 --workers 2,32
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOW = dt.datetime(2026, 1, 1)
CREATED = NOW - dt.timedelta(seconds=30)


def one_decision() -> None:
    from bot import metrics

    metrics.slack_click("fast")
    metrics.observe_click_stored("slack", 0.003)
    metrics.observe_decision("ops", "approved", CREATED, NOW)
    metrics.platform_call("slack", "chat.update", "ok")
    metrics.platform_call("slack", "chat.postMessage", "ok")
    metrics.observe_resume(CREATED, NOW)


def child(mode: str, workers: int, n: int) -> None:
    """One mode in this process: µs per decision's observations, ms per scrape."""
    from prometheus_client import CollectorRegistry, generate_latest

    from bot import metrics

    directory = tempfile.mkdtemp()
    if mode == "files":
        metrics.use_multiprocess(directory)
    for _ in range(1000):
        one_decision()
    start = time.thread_time()
    for _ in range(n):
        one_decision()
    per_decision = (time.thread_time() - start) / n * 1e6
    registry = CollectorRegistry()
    if mode == "files":
        from prometheus_client.multiprocess import MultiProcessCollector

        for _ in range(workers):
            if (pid := os.fork()) == 0:
                one_decision()
                os._exit(0)
            os.waitpid(pid, 0)
        MultiProcessCollector(registry, path=directory)
    else:
        for metric in metrics.PROCESS_METRICS:
            registry.register(metric)
    start = time.thread_time()
    for _ in range(50):
        generate_latest(registry)
    print(f"{per_decision:.2f} {(time.thread_time() - start) / 50 * 1e3:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", default="2,32", help="workers' files per scrape")
    parser.add_argument("--decisions", type=int, default=20000)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.decisions)
        return
    cases = [("memory", 0)] + [("files", int(w)) for w in args.workers.split(",")]
    found: dict[tuple[str, int], list[tuple[float, float]]] = {case: [] for case in cases}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    for _ in range(args.rounds):
        for mode, workers in cases:
            out = subprocess.run([sys.executable, __file__, "--child", mode, str(workers),
                                  "--decisions", str(args.decisions)], env=env, check=True,
                                 capture_output=True, text=True).stdout.split()
            found[(mode, workers)].append((float(out[0]), float(out[1])))
    print("| values | µs CPU per decision's observations | ms CPU per scrape |")
    print("|---|---|---|")
    for (mode, workers), runs in found.items():
        name = "in memory (one process)" if mode == "memory" else f"files, {workers} workers"
        print(f"| {name} | {statistics.median(r[0] for r in runs):.1f} "
              f"| {statistics.median(r[1] for r in runs):.2f} |")


if __name__ == "__main__":
    main()
