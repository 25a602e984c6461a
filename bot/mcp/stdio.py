"""``askhuman mcp``: the MCP server over stdio, for Claude Code, Cursor and friends.

It acts for the API client whose key is in ``ASKHUMAN_API_KEY``, checked by the
running server exactly like a bearer key (``GET /api/v1/me``), and talks to that
server's HTTP API (``ASKHUMAN_URL``). So cards, approvers, deadlines and the audit
are the server's; this process holds no state and may be restarted at will.
"""

from __future__ import annotations

from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.stdio import stdio_server

from bot.mcp.backend import BackendError, RemoteBackend
from bot.mcp.tools import Caller, EditableRules, ToolOptions, build_server


class StdioError(RuntimeError):
    """Cannot start: the message says what to fix."""


async def prepare(url: str, key: str, route: str | None) -> tuple[RemoteBackend, str]:
    backend = RemoteBackend(url, key)
    try:
        await backend.connect()
    except BackendError as exc:
        await backend.close()
        if exc.status == 401:
            raise StdioError("ASKHUMAN_API_KEY was refused by the server (unknown or revoked "
                             "key); create one with 'askhuman api-key create'") from None
        raise StdioError(exc.detail) from None
    if route is not None and route not in backend.routes:
        await backend.close()
        raise StdioError(f"--route {route} is not one of this client's routes "
                         f"({', '.join(backend.routes) or 'none'})")
    chosen = route or (backend.routes[0] if backend.routes else None)
    if chosen is None:
        await backend.close()
        raise StdioError("this API client has no routes")
    return backend, chosen


async def serve_stdio(url: str, key: str, route: str | None, options: ToolOptions,
                      editable: EditableRules | None = None) -> None:
    backend, chosen = await prepare(url, key, route)
    caller = Caller(backend, chosen, dict(editable or {}))

    async def resolve(_ctx: ServerRequestContext[Any, Any]) -> Caller:
        return caller

    server = build_server(resolve, options)
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await backend.close()
