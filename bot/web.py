"""The ASGI app: platform HTTP endpoints plus health checks, served by uvicorn.

``/healthz`` is liveness (the process answers); ``/readyz`` is readiness (the process
can do its job: the database answers), 503 with a short JSON reason when it cannot.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

Endpoint = Callable[[Request], Awaitable[Response]]
Ready = Callable[[], Awaitable[str | None]]
"""A readiness check: None when ready, else a short reason (no secrets, no details)."""


async def healthz(request: Request) -> Response:
    return JSONResponse({"ok": True})


def readyz_endpoint(ready: Ready | None) -> Endpoint:
    """``GET /readyz``: 200 ``{"ok": true}``, or 503 ``{"ok": false, "reason": …}``."""

    async def readyz(request: Request) -> Response:
        reason = await ready() if ready is not None else None
        if reason is None:
            return JSONResponse({"ok": True})
        return JSONResponse({"ok": False, "reason": reason}, status_code=503)

    return readyz


def create_app(
    endpoints: Sequence[tuple[str, Endpoint]],
    lifespan: Callable[[Starlette], AbstractAsyncContextManager[None]] | None = None,
    ready: Ready | None = None,
) -> Starlette:
    """Mount each platform's POST endpoint (e.g. ``/slack/events``) next to ``/healthz``
    and ``/readyz`` (which asks ``ready``; without one it answers like ``/healthz``)."""
    routes = [Route("/healthz", healthz, methods=["GET"]),
              Route("/readyz", readyz_endpoint(ready), methods=["GET"])]
    routes += [Route(path, endpoint, methods=["POST"]) for path, endpoint in endpoints]
    return Starlette(routes=routes, lifespan=lifespan)
