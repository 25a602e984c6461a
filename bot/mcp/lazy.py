"""``/mcp`` without loading the MCP SDK until an MCP client calls.

The ``mcp`` package costs about 16 MB and most of a second to import, and many
deployments never use ``/mcp``. ``LazyMcpEndpoint`` stands in for
``bot.mcp.http.McpEndpoint``: the first request builds the real endpoint and starts
its session manager (the background task waits for that moment), then every
request goes to it exactly as before.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from starlette.routing import Route
from starlette.types import Receive, Scope, Send

if TYPE_CHECKING:
    from bot.api.auth import RateLimiter
    from bot.api.service import Door
    from bot.mcp.http import McpEndpoint

PATH = "/mcp"


class LazyMcpEndpoint:
    """The ``/mcp`` ASGI app; builds ``McpEndpoint`` on the first request."""

    def __init__(self, door: Door, limiter: RateLimiter) -> None:
        self.door = door
        self.limiter = limiter
        self.real: McpEndpoint | None = None
        self._wanted = asyncio.Event()

    def _endpoint(self) -> McpEndpoint:
        if self.real is None:
            from bot.mcp.http import McpEndpoint

            self.real = McpEndpoint(self.door, self.limiter)
            self._wanted.set()
        return self.real

    async def run(self, stop: asyncio.Event) -> None:
        """Wait for the first MCP request (or ``stop``), then run the session manager."""
        waits = [asyncio.ensure_future(self._wanted.wait()), asyncio.ensure_future(stop.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.real is not None and not stop.is_set():
            await self.real.run(stop)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._endpoint()(scope, receive, send)


def lazy_mcp_route(door: Door, limiter: RateLimiter) -> tuple[Route, Any]:
    """``bot.mcp.http.mcp_route``'s lazy twin: the route and its background task."""
    endpoint = LazyMcpEndpoint(door, limiter)
    return Route(PATH, endpoint=endpoint), endpoint.run
