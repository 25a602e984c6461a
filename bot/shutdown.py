"""Closing what ``serve`` opened: in order, once, and all of it even when a step fails.

A process that stops must close its client sessions, connection pools, subprocesses
and database connections itself. Left to the garbage collector they are torn down
half-way (aiohttp prints "Unclosed client session", psycopg "connection was deleted
while still open"), and a pooled connection can be cut in the middle of a request.

``Shutdown`` is the list of those steps. The lifespan adds them in the order they
must run (stop the loops, drain what the engine still sends, close agent runtimes,
then the platforms' HTTP clients, then the database) and runs the list once. A step
that raises or hangs is logged and the next one still runs: one broken platform must
not leave the database and the other platforms open.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

log = logging.getLogger("askhuman.shutdown")

Closer = Callable[[], Awaitable[object]]
"""An async callable that closes one thing (``aclose``, ``drain``, …)."""

STEP_TIMEOUT_SECONDS = 20.0
"""No single step holds the exit for longer; each bounds its own work below this (the
background tasks: 10 s to stop, then 5 s to unwind after a cancel)."""


@dataclass(frozen=True)
class Step:
    name: str
    close: Closer


class Shutdown:
    """Ordered close steps, run at most once (``run`` again is a no-op)."""

    def __init__(self, timeout: float = STEP_TIMEOUT_SECONDS) -> None:
        self._steps: list[Step] = []
        self._timeout = timeout
        self._ran = False

    def add(self, name: str, close: Closer) -> None:
        """Run ``close`` after every step added before it."""
        self._steps.append(Step(name, close))

    @property
    def names(self) -> list[str]:
        return [step.name for step in self._steps]

    async def run(self) -> list[str]:
        """Run every step in order; returns the names of those that failed (logged)."""
        if self._ran:
            return []
        self._ran = True
        failed: list[str] = []
        for step in self._steps:
            try:
                await asyncio.wait_for(step.close(), self._timeout)
            except Exception as exc:
                failed.append(step.name)
                log.error("shutdown step failed", exc_info=not isinstance(exc, TimeoutError),
                          extra={"step": step.name, "error": type(exc).__name__})
        if failed:
            log.warning("shutdown finished with failures", extra={"failed": failed})
        else:
            log.info("shutdown complete", extra={"steps": len(self._steps)})
        return failed


async def stop_tasks(tasks: list[asyncio.Task[None]], grace: float, cancel_wait: float) -> None:
    """Give ``tasks`` ``grace`` seconds to end on their own (their stop event is set),
    then cancel the rest and wait up to ``cancel_wait`` for them to unwind, so their
    ``finally`` blocks (closing a websocket, a session) run before the clients under
    them are closed. A task that failed is logged."""
    if not tasks:
        return
    _, pending = await asyncio.wait(tasks, timeout=grace)
    for task in pending:
        log.warning("background task did not stop in time; cancelling",
                    extra={"task": task.get_name()})
        task.cancel()
    if pending:
        await asyncio.wait(pending, timeout=cancel_wait)
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            log.error("background task failed",
                      extra={"task": task.get_name(), "error": repr(task.exception())})


@contextmanager
def exit_zero_on_stop_signals() -> Iterator[None]:
    """While the server runs, SIGTERM and SIGINT end the process with ``SystemExit(0)``.

    uvicorn catches both signals, shuts down gracefully (the lifespan closes
    everything), then restores the handlers it found and raises the signal again. With
    the default handlers that kills the process by the signal before Python finalizes:
    no exit code 0 for the supervisor, and no chance to report anything left open. With
    these handlers the re-raised signal becomes a normal exit after the shutdown.
    """

    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(0)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
