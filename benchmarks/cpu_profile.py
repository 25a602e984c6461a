"""Where a served process spends its Python CPU: py-spy on the GIL holder, by part.

``serve_throughput.py --profile`` records each ``serve`` process with
``py-spy record --gil`` while the clicks are answered (samples are taken only from
the thread that holds the GIL, so a thread waiting for a lock, a socket or the GIL
itself is not counted; SQLite's C code runs without the GIL and is not counted either).
This module turns the raw, collapsed stacks into a table: the share of the samples
under each part of a decision, the first part whose marker occurs in a stack taking
the sample. pydantic-ai runs each graph step in its own anyio task, whose stack does
not show the resume that started it; those are counted by their package.

    python benchmarks/cpu_profile.py /tmp/serve.txt   # a file py-spy wrote (--format raw)

py-spy is not a dependency of askhuman: ``pip install py-spy`` where you profile.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import signal
import subprocess
from pathlib import Path

PARTS: tuple[tuple[str, str], ...] = (
    ("pydantic-ai: the agent's resume", "LocalRuntime.resume"),
    ("pydantic-ai: graph steps in their own tasks", "pydantic_"),
    ("outbox: Slack calls (card update, final answer)", "Outbox._dispatch_in_order"),
    ("outbox: sweeps", "Outbox.sweep"),
    ("HTTP in: the click's request", "RequestResponseCycle.run_asgi"),
    ("clicks: decide a stored click", "ClickInbox"),
    ("resume worker (engine side)", "ResumeWorker."),
    ("database threads (SQLAlchemy, Python side)", "_WorkItem.run"),
    ("engine loops (timeouts, reminders, audit seal …)", "Engine._loop"),
    ("committer", "Committer."),
    ("aiohttp (Slack client I/O)", "aiohttp"),
    ("anyio", "anyio"),
)


def record(pid: int, out: Path, rate: int = 1000) -> subprocess.Popen[bytes]:
    """Start ``py-spy record --gil`` on ``pid`` (and its subprocesses); stop it with
    ``finish``. Raises ``RuntimeError`` when py-spy is not installed."""
    if shutil.which("py-spy") is None:
        raise RuntimeError("--profile needs py-spy: pip install py-spy")
    return subprocess.Popen(
        ["py-spy", "record", "--gil", "--subprocesses", "--format", "raw", "-r", str(rate),
         "-o", str(out), "-p", str(pid)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def finish(spy: subprocess.Popen[bytes]) -> None:
    """Stop a recording: py-spy writes its file on SIGINT."""
    spy.send_signal(signal.SIGINT)
    spy.wait(timeout=60)


def shares(path: Path) -> tuple[int, dict[str, int]]:
    """(samples, samples per part) of one raw py-spy file."""
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        total += int(n)
        part = next((name for name, marker in PARTS if marker in stack), "everything else")
        counts[part] += int(n)
    return total, dict(counts)


def report(paths: list[Path]) -> str:
    """A Markdown table: each part's share of the Python CPU, over all ``paths``."""
    total, counts = 0, collections.Counter[str]()
    for path in paths:
        samples, parts = shares(path)
        total += samples
        counts.update(parts)
    rows = ["| part of the serve process (py-spy --gil) | share of Python CPU |", "|---|---|"]
    rows += [f"| {name} | {100 * n / max(total, 1):.1f} % |" for name, n in counts.most_common()]
    return "\n".join([*rows, f"\n{total} samples"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    print(report(parser.parse_args().files))


if __name__ == "__main__":
    main()
