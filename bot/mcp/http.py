"""``/mcp``: the MCP server over Streamable HTTP inside ``askhuman serve``.

Every HTTP request is authenticated with the same bearer keys as ``/api/v1`` (401
problem+json otherwise) and counts against the client's rate limit. The MCP session
is bound to the client that opened it (the SDK refuses a session id presented with
another key). ``?route=ops`` picks the default route among the client's routes
(else its first one); ``&editable=Bash:command`` (repeatable) lets approvers edit those
arguments of that tool's ``request_approval`` calls (``bot.mcp.tools.parse_editable``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.datastructures import Headers, QueryParams
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from bot.api.auth import RateLimiter, bearer_token, client_for_key
from bot.api.problems import Problem
from bot.api.service import Door
from bot.engine import trace_context
from bot.engine.external import ApiClientInfo
from bot.mcp.backend import BackendError, LocalBackend
from bot.mcp.tools import Caller, ToolOptions, build_server, parse_editable

CLIENT_KEY = "askhuman.client"
ROUTE_KEY = "askhuman.route"
EDITABLE_KEY = "askhuman.editable"
PATH = "/mcp"


class McpEndpoint:
    """ASGI app: authenticate, rate-limit, then hand over to the SDK's session manager."""

    def __init__(self, door: Door, limiter: RateLimiter) -> None:
        self.door = door
        self.limiter = limiter
        options = ToolOptions(progress_seconds=door.settings.api.mcp_progress_seconds,
                              local_answers=door.settings.api.local_answers)
        self.server = build_server(self.resolve, options)
        self.manager = StreamableHTTPSessionManager(
            self.server, max_request_body_size=door.settings.api.max_body_bytes)
        self.started = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        """The session manager's lifetime (a background task of ``serve``)."""
        async with self.manager.run():
            self.started.set()
            await stop.wait()

    async def resolve(self, ctx: ServerRequestContext[Any, Any]) -> Caller:
        scope = getattr(ctx.request, "scope", None) or {}
        client = scope.get(CLIENT_KEY)
        if not isinstance(client, ApiClientInfo):
            raise BackendError(401, "not authenticated")
        route = scope.get(ROUTE_KEY) or (client.routes[0] if client.routes else None)
        trace = trace_context.from_headers(Headers(scope=scope)) if scope else None
        return Caller(LocalBackend(self.door, client, trace), route,
                      scope.get(EDITABLE_KEY) or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            headers = Headers(scope=scope)
            client = await client_for_key(self.door.engine, bearer_token(headers))
            await self.limiter.take(client)
            query = QueryParams(scope.get("query_string", b""))
            route = query.get("route")
            if route is not None:
                self.door.check_route(client, route)
            try:
                editable = parse_editable(query.getlist("editable"))
            except ValueError as exc:
                raise Problem(400, "bad-query", str(exc)) from None
            await asyncio.wait_for(self.started.wait(), 10)
        except Problem as problem:
            await problem.response(PATH)(scope, receive, send)
            return
        token = AccessToken(token="", client_id=f"api-client:{client.id}", scopes=[])
        scope = {**scope, "user": AuthenticatedUser(token), CLIENT_KEY: client,
                 ROUTE_KEY: route, EDITABLE_KEY: editable}
        await self.manager.handle_request(scope, receive, send)


def mcp_route(door: Door, limiter: RateLimiter) -> tuple[Route, Any]:
    """The ``/mcp`` route and the background task that runs its session manager."""
    endpoint = McpEndpoint(door, limiter)
    return Route(PATH, endpoint=endpoint), endpoint.run
