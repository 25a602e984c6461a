"""How long one render of a maximum-size request takes, per platform.

The request is as big as the default ask_human config allows: 8 select fields of 100
options (each label at the 200-character cap), an 8000-character Markdown body mixing
headings, lists, tables, code and links, a 1000-character question and 4 actions.
Each platform renders it ``--repeat`` times (after a warm-up); the median and p99 of
single renders are printed, plus ``json.dumps`` of the output for scale.

    .venv/bin/python benchmarks/render.py --repeat 300
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from renderers import markdown
from renderers.feishu import render_card
from renderers.slack import render_request
from tests.renderers.cases import max_card


def measure(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Median and p99 of ``repeat`` single calls, in milliseconds."""
    for _ in range(5):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.99))]


def _clear() -> None:
    """Forget memoized Markdown and label text, as for a request rendered the first time."""
    for name in ("_markdown_units", "_plain_full"):  # absent before the caches existed
        cached = getattr(markdown, name, None)
        if cached is not None:
            cached.cache_clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=300)
    ns = parser.parse_args()
    card = max_card()
    rows = [
        ("slack render_request", lambda: render_request(card)),
        ("feishu render_card", lambda: render_card(card)),
    ]
    slack_out, feishu_out = render_request(card), render_card(card)
    print("| what | median ms | p99 ms |\n|---|---|---|")
    for name, fn in rows:
        med, p99 = measure(fn, ns.repeat)
        print(f"| {name} | {med:.2f} | {p99:.2f} |")
    for name, fn in rows:
        med, p99 = measure(lambda f=fn: (_clear(), f()), max(ns.repeat // 5, 20))  # type: ignore[misc]
        print(f"| {name}, cold (first render of this body and labels) | {med:.2f} | {p99:.2f} |")
    for name, out in (("slack", slack_out), ("feishu", feishu_out)):
        med, p99 = measure(lambda o=out: json.dumps(o), ns.repeat)  # type: ignore[misc]
        print(f"| json.dumps of the {name} output | {med:.2f} | {p99:.2f} |")


if __name__ == "__main__":
    main()
