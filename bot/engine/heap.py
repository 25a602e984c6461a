"""Keep the cyclic garbage collector off the heap a serving process starts with.

By the time the worker loops start, the process holds ~200,000 long-lived objects
(pydantic, pydantic-ai, SQLAlchemy, the platform SDKs, the admin config). CPython's
collector rescans all of them at every full collection, and the steady churn of a
resume (pydantic-ai builds and drops thousands of objects per run) triggers one every
~70 decisions: measured on the throughput benchmark, ~2.6 ms of a decision's ~18 ms
CPU went to the collector. ``gc.freeze()`` moves what is alive at that point into a
permanent generation the collector never scans (reference counting still frees it),
which cut that to ~0.4 ms. It is done once per process, after one full collection so
no garbage is frozen along with it: by ``askhuman serve`` before uvicorn starts, and
by the first ``serve_forever`` otherwise. A parent that forks workers freezes its own
heap (the preloaded modules) just before the first fork (``freeze_before_fork``), as
the ``gc.freeze`` documentation advises, so the workers' pages stay shared.

Full collections also stopped the event loop, and so every click's ack, in the middle
of bursts (35-130 ms on the startup heap; ``benchmarks/slack_ack.py`` rounds with one
had p99 ~260 ms against ~120 ms). So young collections also run every 10,000
allocations instead of 700, which makes full ones (15-35 ms once the startup heap is
frozen) rare enough to miss most bursts. Frozen objects are still freed by reference
counting; only cycles among them (a config reload's replaced agents) are never freed.
"""

from __future__ import annotations

import gc

_frozen = False
YOUNG_GC_THRESHOLD = 10_000
"""Allocations between young collections (CPython's default is 700)."""


def freeze_startup_heap() -> bool:
    """Collect once, then exempt every surviving object from later collections; only
    the first call in a process does anything (returns whether this one did)."""
    global _frozen
    if _frozen:
        return False
    _frozen = True
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_GC_THRESHOLD, middle, old)
    return True


def freeze_before_fork() -> None:
    """Collect once, then freeze what is alive, in a parent about to fork workers
    (``serve --workers N``): the workers' collectors then never write to the pages
    they share with it. Unlike ``freeze_startup_heap`` it leaves the thresholds alone
    and does not count as this process's freeze: each worker still freezes its own
    startup heap, the app it builds after the fork."""
    gc.collect()
    gc.freeze()
