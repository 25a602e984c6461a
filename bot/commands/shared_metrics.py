"""What ``serve --workers N``'s workers share for Prometheus: the directory their
metrics are summed from, and the separate metrics port.

prometheus_client's multiprocess mode (``bot.metrics.use_multiprocess``) has each
process write its values to files of its own in one directory, and a scrape sum them.
Its documented rules: the directory is named by ``PROMETHEUS_MULTIPROC_DIR``, must be
emptied before the server starts (files of an earlier run would be summed in), and
gunicorn's ``child_exit`` hook calls ``mark_process_dead`` for each worker that ends
(it removes the dead worker's files of live gauges; its counters and histograms stay
and are still summed, so no counter goes back when a worker dies or is replaced).

The arbiter makes a private directory (``tempfile.mkdtemp``: mode 0700, so no other
user can read or forge the values) and removes it when it exits; an admin who sets
``PROMETHEUS_MULTIPROC_DIR`` gets that directory instead, emptied of prometheus_client's
files at start and left in place at exit. Either way it belongs to one arbiter: two
servers sharing it would sum each other's metrics.

``metrics.port`` is bound once, by the arbiter, as gunicorn binds the main port
(``bind_port``); each worker it forks serves ``/metrics`` on that inherited socket
(``listener``), so the kernel hands each scrape to one of them, and every one answers
with the sum. The arbiter never accepts on it.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("askhuman.serve")

ENV = "PROMETHEUS_MULTIPROC_DIR"
FILES = ("counter_*.db", "histogram_*.db", "summary_*.db", "gauge_*.db")
"""prometheus_client's file names (``<type>[_<mode>]_<pid>.db``): all an admin's
directory is emptied of, so a mistaken ``PROMETHEUS_MULTIPROC_DIR=/tmp`` loses nothing
else."""


@dataclass
class MetricsDirectory:
    """The multiprocess directory of one ``serve --workers N`` arbiter."""

    path: Path
    owned: bool
    """Made by this arbiter (removed at exit), not named by the admin."""
    owner: int = field(default_factory=os.getpid)
    """The arbiter: a worker leaves through the same stack, and must not remove it."""

    @classmethod
    def open(cls, env: MutableMapping[str, str]) -> MetricsDirectory:
        """The admin's directory (made if missing, emptied) or a fresh private one;
        named in ``env`` (``os.environ``: the workers inherit it, and prometheus_client
        reads it when it opens a process's files)."""
        given = env.get(ENV)
        if given:
            path = Path(given)
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            for pattern in FILES:
                for stale in path.glob(pattern):
                    stale.unlink(missing_ok=True)
        else:
            path = Path(tempfile.mkdtemp(prefix="askhuman-metrics-"))
        env[ENV] = str(path)
        log.info("metrics of every worker summed from one directory",
                 extra={"directory": str(path), "private": not given})
        return cls(path, owned=not given)

    def process_dead(self, _arbiter: Any, worker: Any) -> None:
        """gunicorn's ``child_exit`` hook (in the arbiter, after a worker ended)."""
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid, str(self.path))  # type: ignore[no-untyped-call]

    def close(self) -> None:
        """Remove the directory if this arbiter made it (a kill -9 of the arbiter
        leaves it in the temp directory; the next start makes a new one)."""
        if self.owned and os.getpid() == self.owner:
            shutil.rmtree(self.path, ignore_errors=True)


_listener: socket.socket | None = None
"""The metrics port's socket, bound in the arbiter; its forks inherit it."""


def bind_port(host: str, port: int) -> socket.socket:
    """Bind ``metrics.port`` in the arbiter, before any fork (``OSError`` if taken)."""
    global _listener
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    _listener = socket.create_server((host, port), family=family, backlog=2048)
    return _listener


def listener() -> socket.socket | None:
    """In a worker of ``serve --workers N``: the metrics port the arbiter bound, to
    serve on instead of binding it again; None in one process."""
    return _listener
