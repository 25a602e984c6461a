"""Run an ASGI app under uvicorn on a free 127.0.0.1 port, for end-to-end tests.

Two flavours:

* ``AsgiServer`` (sync context manager): uvicorn in a background thread with its own
  event loop. Use it when the test or benchmark must not share a loop with the app.
* ``serve_in_loop`` (async context manager): uvicorn as a task in the *current* loop,
  so tests can also await objects the app uses (engine, DB) without crossing loops.

Either way requests travel over a real TCP socket, signed like Slack would sign them.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import uvicorn


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _config(app: Any, port: int, **kwargs: Any) -> uvicorn.Config:
    kwargs.setdefault("log_level", "warning")
    kwargs.setdefault("access_log", False)
    kwargs.setdefault("lifespan", "on")
    return uvicorn.Config(app, host="127.0.0.1", port=port, **kwargs)


class AsgiServer:
    """uvicorn in a daemon thread; ``url`` is ``http://127.0.0.1:<port>``."""

    def __init__(self, app: Any, *, port: int | None = None, **uvicorn_kwargs: Any) -> None:
        self.port = port or free_port()
        self.server = uvicorn.Server(_config(app, self.port, **uvicorn_kwargs))
        self._thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> AsgiServer:
        self._thread.start()
        deadline = threading.Event()
        waited = 0.0
        while not self.server.started:
            if not self._thread.is_alive():
                raise RuntimeError("uvicorn exited during startup")
            if waited > timeout:
                raise RuntimeError("uvicorn did not start in time")
            deadline.wait(0.02)
            waited += 0.02
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout)

    def __enter__(self) -> AsgiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@asynccontextmanager
async def serve_in_loop(app: Any, **uvicorn_kwargs: Any) -> AsyncIterator[str]:
    """Serve ``app`` in the running loop; yields the base URL."""
    port = free_port()
    server = uvicorn.Server(_config(app, port, **uvicorn_kwargs))
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("uvicorn exited during startup")
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
