"""The ASGI app: platform HTTP endpoints plus health checks, served by uvicorn.

``/healthz`` is liveness (the process answers); ``/readyz`` is readiness (the process
can do its job: the database answers), 503 with a short JSON reason when it cannot.

Every request with a body passes ``BodyLimit`` first: nothing behind it (Bolt, the
Feishu SDK, any later API) ever holds more than ``max_body_bytes`` of one request,
so an unsigned multi-megabyte POST costs a 413 and no parsing at all.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bot.api.body import too_large_problem

Endpoint = Callable[[Request], Awaitable[Response]]
Ready = Callable[[], Awaitable[str | None]]
"""A readiness check: None when ready, else a short reason (no secrets, no details)."""

log = logging.getLogger("askhuman.web")
API_PREFIX = "/api/"

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
"""1 MiB: a Slack or Feishu callback is a few KB; Feishu's largest card is 30 KB."""
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


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


def refuse(status: int, reason: str, path: str, **extra: object) -> PlainTextResponse:
    """A short plain-text refusal plus one log line (no traceback, no body echoed)."""
    log.warning("http request refused",
                extra={"status": status, "reason": reason, "path": path, **extra})
    return PlainTextResponse(reason, status_code=status)


class BodyLimit:
    """Pure ASGI middleware: bodies over ``max_bytes`` get 413 before the app sees them.

    A declared ``Content-Length`` over the limit is refused at once, without reading a
    byte. A chunked body is read and counted, and reading stops at the first chunk past
    the limit. A body within the limit is handed to the app in one message (the app
    would read it whole anyway); later ``receive`` calls go to the server, so the app
    still learns about a disconnect.
    """

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._too_large(path, declared=declared)(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before sending its body
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(path, received=size)(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(b"".join(chunks), receive), send)

    def _too_large(self, path: str, **size: int) -> Response:
        reason = f"request body too large (limit {self.max_bytes} bytes)"
        plain = refuse(413, reason, path, limit=self.max_bytes, **size)
        if not path.startswith(API_PREFIX):
            return plain
        # API clients get the same RFC 9457 problem+json as every other API error.
        return too_large_problem(self.max_bytes).response(path)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            return int(value) if value.isdigit() else None  # the server rejects bad ones
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that yields the buffered body once, then defers to the server."""
    pending = True

    async def replayed() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def create_app(
    endpoints: Sequence[tuple[str, Endpoint]],
    lifespan: Callable[[Starlette], AbstractAsyncContextManager[None]] | None = None,
    extra_routes: Sequence[BaseRoute] = (),
    ready: Ready | None = None,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> Starlette:
    """Mount each platform's POST endpoint (e.g. ``/slack/events``) next to ``/healthz``
    and ``/readyz`` (which asks ``ready``; without one it answers like ``/healthz``);
    ``extra_routes`` are mounted as they are (the API's GET/POST routes, ``/mcp``).

    Every route, today's and any added later, sits behind ``BodyLimit``.
    """
    routes: list[BaseRoute] = [Route("/healthz", healthz, methods=["GET"]),
                               Route("/readyz", readyz_endpoint(ready), methods=["GET"])]
    routes += [Route(path, endpoint, methods=["POST"]) for path, endpoint in endpoints]
    routes += list(extra_routes)
    return Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(BodyLimit, max_bytes=max_body_bytes)],
    )
