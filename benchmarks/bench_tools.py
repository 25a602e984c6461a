"""The tool the tool-approval benchmark approves: it records when it started."""

from __future__ import annotations

import os
import time


def record(tag: str) -> str:
    """Append ``tag`` and the wall-clock start time to $BENCH_JOURNAL."""
    started = time.time()
    with open(os.environ["BENCH_JOURNAL"], "a", encoding="utf-8") as journal:
        journal.write(f"{tag} {started:.6f}\n")
    return f"recorded {tag}"
