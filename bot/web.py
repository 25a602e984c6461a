"""The ASGI app: platform HTTP endpoints plus a health check, served by uvicorn."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

Endpoint = Callable[[Request], Awaitable[Response]]


async def healthz(request: Request) -> Response:
    return JSONResponse({"ok": True})


def create_app(
    endpoints: Sequence[tuple[str, Endpoint]],
    lifespan: Callable[[Starlette], AbstractAsyncContextManager[None]] | None = None,
    extra_routes: Sequence[BaseRoute] = (),
) -> Starlette:
    """Mount each platform's POST endpoint (e.g. ``/slack/events``) next to ``/healthz``;
    ``extra_routes`` are mounted as they are (the API's GET/POST routes, ``/mcp``)."""
    routes: list[BaseRoute] = [Route("/healthz", healthz, methods=["GET"])]
    routes += [Route(path, endpoint, methods=["POST"]) for path, endpoint in endpoints]
    routes += list(extra_routes)
    return Starlette(routes=routes, lifespan=lifespan)
