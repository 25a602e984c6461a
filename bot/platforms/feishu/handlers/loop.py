"""The application's event loop, and the work the Feishu handlers hand to it.

The long connection's SDK calls the handlers synchronously on its own thread; they
hand work to the main loop with ``run_coroutine_threadsafe`` (``spawn``). Work
started on the loop itself is tracked too (``track``), so ``drain`` can wait for all
of it at shutdown (and tests can wait for it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine
from typing import Any


class MainLoop:
    """The loop engine calls and adapter holds run on, plus the work scheduled there."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._background: set[concurrent.futures.Future[Any]] = set()
        self._tasks: set[asyncio.Future[Any]] = set()

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The application's loop: engine calls and adapter holds run there."""
        self._loop = loop

    def require(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("FeishuEventHandlers.bind_loop() was not called")
        return self._loop

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """From an SDK thread: run ``coro`` on the main loop without waiting for it."""
        future = asyncio.run_coroutine_threadsafe(coro, self.require())
        self._background.add(future)
        future.add_done_callback(self._background.discard)

    def track(self, task: asyncio.Future[Any]) -> None:
        """On the main loop: keep ``task`` until it is done (``drain`` waits for it)."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self, timeout: float = 10.0) -> None:
        """Wait (on the main loop) until scheduled message handling and click decisions
        have finished."""
        pending: list[asyncio.Future[Any]] = [
            asyncio.wrap_future(f) for f in set(self._background)]
        pending.extend(self._tasks)
        if pending:
            await asyncio.wait(pending, timeout=timeout)
