"""How long one render of a maximum-size request takes, per platform.

The request is as big as the default ask_human config allows: 8 select fields of 100
options (each label at the 200-character cap), an 8000-character Markdown body mixing
headings, lists, tables, code and links, a 1000-character question and 4 actions.
Each platform renders it ``--repeat`` times (after a warm-up); the median and p99 of
single renders are printed (and their median CPU time), plus ``json.dumps`` of the
output for scale. A first render
(caches cleared) is timed through each Markdown parser ``renderers.parser`` has here
(markdown-it-pyrs, the default, and markdown-it-py, the fallback), with the body's parse
alone and its conversion to text units alone, so a slow first render shows where it is.

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

from renderers import escapes, markdown, parser
from renderers.feishu import render_card
from renderers.slack import render_request
from tests.renderers.cases import max_card


def measure(fn: Callable[[], Any], repeat: int) -> tuple[float, float, float]:
    """Median and p99 of ``repeat`` single calls, and the median of their CPU time (the
    thread's), in milliseconds: on a shared machine the CPU time is the steadier one."""
    for _ in range(5):
        fn()
    times, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.thread_time()
        fn()
        times.append((time.perf_counter() - start) * 1000)
        cpu.append((time.thread_time() - start_cpu) * 1000)
    times.sort()
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    return statistics.median(times), p99, statistics.median(cpu)


def _clear() -> None:
    """Forget memoized Markdown and label text, as for a request rendered the first time."""
    for module, name in ((markdown, "_markdown_units"), (markdown, "_plain_full"),
                         (escapes, "_plain_full")):  # where each cache is (or was) kept
        cached = getattr(module, name, None)
        if cached is not None:
            cached.cache_clear()


def _cold(fn: Callable[[], object]) -> Callable[[], None]:
    """``fn`` as a first render: the caches cleared before each call."""
    def run() -> None:
        _clear()
        fn()
    return run


def main() -> None:
    parser_ = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser_.add_argument("--repeat", type=int, default=300)
    ns = parser_.parse_args()
    card = max_card()
    body = markdown.clean(card.args.markdown or "")
    rows: list[tuple[str, Callable[[], object]]] = [
        ("slack render_request", lambda: render_request(card)),
        ("feishu render_card", lambda: render_card(card)),
    ]
    slack_out, feishu_out = render_request(card), render_card(card)
    cold = max(ns.repeat // 5, 20)
    print(f"default parser: {parser.active()}; the max body is read in Rust: "
          f"{not parser.rust_may_differ(body)}\n")
    print("| what | median ms | p99 ms | CPU ms (median) |\n|---|---|---|---|")
    for name, fn in rows:
        med, p99, cpu = measure(fn, ns.repeat)
        print(f"| {name} | {med:.2f} | {p99:.2f} | {cpu:.2f} |")
    for which in parser.PARSERS:
        with parser.using(which):
            parse = parser.PARSERS[which]
            parts: list[tuple[str, Callable[[], object]]] = [
                ("parse of the body alone", lambda p=parse: p(body)),  # type: ignore[misc]
                ("body → Slack text units, cold",
                 _cold(lambda: markdown.markdown_units(body, markdown.SLACK))),
                *((f"{name}, cold (first render of this body and labels)", _cold(fn))
                  for name, fn in rows),
            ]
            for name, fn in parts:
                med, p99, cpu = measure(fn, cold)
                print(f"| {which}: {name} | {med:.2f} | {p99:.2f} | {cpu:.2f} |")
    _clear()
    for name, out in (("slack", slack_out), ("feishu", feishu_out)):
        med, p99, cpu = measure(lambda o=out: json.dumps(o), ns.repeat)  # type: ignore[misc]
        print(f"| json.dumps of the {name} output | {med:.2f} | {p99:.2f} | {cpu:.2f} |")


if __name__ == "__main__":
    main()
