"""How long one decision holds SQLite's write lock, transaction by transaction.

On SQLite every write transaction holds the one write lock (``storage.db.WriterLock``,
``BEGIN IMMEDIATE`` … ``COMMIT``) of the database, across all processes. Whatever a
decision's write transactions spend inside it is the serial part of the system: with
T ms held per decision, no number of ``serve`` processes decides more than 1000 / T
per second. This measures T the way a click on an idle server is decided: the Slack
system of the tests (real Bolt app, engine and loopback fake Slack, as ``serve`` wires
them, in this process), one card at a time, one click on it, until the run's final
answer is posted; every ``Committer.commit_batch`` (the engine's write transactions)
and every ``WriterLock`` hold is timed (wall time, so a transaction that waits for the
GIL inside the lock counts: the lock is held meanwhile).

    .venv/bin/python benchmarks/write_lock.py --clicks 30
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.engine.committer import Committer
from storage.db import WriterLock
from tests.fakes.slack_api import FakeSlackAPI
from tests.slack.conftest import ALICE, BOT_TOKEN, CAROL, STARTER, make_settings, running_system

HELD: list[float] = []
"""Seconds each outermost ``WriterLock`` hold lasted, since the last reset."""
BY_STEP: dict[str, list[tuple[float, float]]] = {}
"""(wall ms, thread CPU ms) of each ``commit_batch``, by the names of the steps it
committed: wall well above CPU is time the holder of the lock spent waiting (for the
GIL, mostly, while the event loop runs; or for the disk's fsync)."""


def step_name(fn: Callable[..., Any]) -> str:
    """Where a committed step was written (``Committer.grouped`` wraps it in partials)."""
    while isinstance(fn, functools.partial):
        fn = fn.args[0] if fn.func.__name__ == "_with_effects" and fn.args else fn.func
    code = getattr(fn, "__code__", None)
    where = f"{Path(code.co_filename).name}:{code.co_firstlineno}" if code else "?"
    return f"{getattr(fn, '__qualname__', '?')} ({where})"


def instrument() -> None:
    """Time every outermost write-lock hold and every batch the committer commits."""
    enter, leave = WriterLock.__enter__, WriterLock.__exit__
    commit = Committer.commit_batch
    since: dict[int, float] = {}

    def timed_enter(self: WriterLock) -> WriterLock:
        out = enter(self)
        if self._depth == 1:
            since[id(self)] = time.perf_counter()
        return out

    def timed_exit(self: WriterLock, *exc: object) -> None:
        if self._depth == 1 and id(self) in since:
            HELD.append(time.perf_counter() - since.pop(id(self)))
        leave(self, *exc)

    def timed_commit(self: Committer, fns: list[Callable[..., Any]]) -> Any:
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            return commit(self, fns)
        finally:
            name = " + ".join(sorted(step_name(fn) for fn in fns))
            BY_STEP.setdefault(name, []).append(((time.perf_counter() - start) * 1000,
                                                 (time.thread_time() - cpu) * 1000))

    WriterLock.__enter__ = timed_enter  # type: ignore[method-assign]
    WriterLock.__exit__ = timed_exit  # type: ignore[method-assign]
    Committer.commit_batch = timed_commit  # type: ignore[method-assign]


async def one_decision(slack: Any, seen: set[str], number: int) -> tuple[float, float, int]:
    """Start a run, wait for its card, then click it: (lock ms held, click → final
    answer ms, write transactions) of the decision, once everything settled."""
    assert (await slack.command(f"run deploy ship v{number}")).status_code == 200
    for _ in range(1000):
        fresh = [m.ts for m in list(slack.fake.messages.values()) if m.blocks and m.ts not in seen]
        if fresh:
            break
        await asyncio.sleep(0.005)
    ts = fresh[-1]
    seen.add(ts)
    await asyncio.sleep(0.3)  # the start's own writes are done
    posts = len(slack.fake.calls_to("chat.postMessage"))
    HELD.clear()
    BY_STEP.clear()
    start = time.perf_counter()
    response = await slack.interact(slack.click_payload(ts, "Approve", ALICE))
    assert response.status_code == 200
    while len(slack.fake.calls_to("chat.postMessage")) <= posts:
        await asyncio.sleep(0.0005)
    final = (time.perf_counter() - start) * 1000
    await asyncio.sleep(0.3)  # the outbox's bookkeeping after the post
    return sum(HELD) * 1000, final, len(HELD)


async def main(clicks: int) -> None:
    instrument()
    with tempfile.TemporaryDirectory() as tmp, FakeSlackAPI(token=BOT_TOKEN) as fake:
        fake.add_users([ALICE, CAROL, STARTER])
        settings = make_settings(f"sqlite:///{Path(tmp) / 'askhuman.db'}")
        async with running_system(fake, settings) as slack:
            seen: set[str] = set()
            held, finals, counts = [], [], []
            steps: dict[str, list[tuple[float, float]]] = {}
            for number in range(clicks + 2):
                lock_ms, final, count = await one_decision(slack, seen, number)
                if number < 2:
                    continue  # warm-up: imports, first runtime, caches
                held.append(lock_ms)
                finals.append(final)
                counts.append(count)
                for name, times in BY_STEP.items():
                    steps.setdefault(name, []).extend(times)
    print(f"{clicks} decisions, one at a time (idle), SQLite, in-process\n")
    print("| per decision | median | max |\n|---|---|---|")
    print(f"| write-lock held, ms (all transactions) | {statistics.median(held):.1f} "
          f"| {max(held):.1f} |")
    print(f"| write transactions | {statistics.median(counts):.0f} | {max(counts)} |")
    print(f"| click → final answer posted, ms | {statistics.median(finals):.1f} "
          f"| {max(finals):.1f} |")
    print(f"\nCeiling on SQLite, any number of processes: 1000 / "
          f"{statistics.median(held):.1f} ms = {1000 / statistics.median(held):.0f} "
          "decisions/s\n")
    print("| transaction (the steps it committed) | per decision | median wall ms "
          "| median CPU ms |\n|---|---|---|---|")
    for name, times in sorted(steps.items(), key=lambda kv: -sum(w for w, _ in kv[1])):
        walls, cpus = [w for w, _ in times], [c for _, c in times]
        print(f"| {name} | {len(times) / clicks:.1f} | {statistics.median(walls):.2f} "
              f"| {statistics.median(cpus):.2f} |")
    print("\n(The click's own store, ``ClickWriter``, commits outside ``Committer``: it is "
          "in the lock total, not in this table.)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, default=30)
    asyncio.run(main(parser.parse_args().clicks))
