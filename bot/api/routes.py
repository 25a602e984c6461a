"""``/api/v1``: Starlette routes over the ``Door`` service.

Each handler authenticates (Bearer key → client, 401), spends a rate-limit token
(429), reads the body under the cap (413) and only then parses it (400/422).
Every error is problem+json.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from bot.api.auth import RateLimiter, bearer_token, client_for_key
from bot.api.body import json_object
from bot.api.openapi import openapi_document
from bot.api.problems import Problem
from bot.api.query import query_integer, query_number
from bot.api.service import MAX_WAIT_SECONDS, Door
from bot.api.views import API, request_json, run_json
from bot.engine import trace_context
from bot.engine.committer import log
from bot.engine.external import ApiClientInfo

Handler = Callable[[Request, ApiClientInfo], Awaitable[Response]]
Endpoint = Callable[[Request], Awaitable[Response]]
ANY_METHOD = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"]
"""Routed to ``_by_method``, which answers the ones a path lacks with a problem."""


class ApiRoutes:
    """The handlers, bound to one ``Door`` and rate limiter."""

    def __init__(self, door: Door, limiter: RateLimiter | None = None) -> None:
        self.door = door
        self.limiter = limiter or RateLimiter(door.engine)
        self.max_body = door.settings.api.max_body_bytes

    def routes(self) -> list[BaseRoute]:
        """One route per path: a method it lacks answers 405 problem+json with ``Allow``
        listing exactly the documented ones; any other ``/api/v1`` path is a 404."""
        guarded = self._guarded
        resources: dict[str, dict[str, Endpoint]] = {
            "/openapi.json": {"GET": self.openapi},
            "/me": {"GET": guarded(self.me)},
            "/requests": {"GET": guarded(self.list_requests),
                          "POST": guarded(self.create_request)},
            "/requests/{ref}": {"GET": guarded(self.get_request)},
            "/requests/{ref}/cancel": {"POST": guarded(self.cancel_request)},
            "/requests/{ref}/answer": {"POST": guarded(self.answer_request)},
            "/approvals": {"POST": guarded(self.create_approval)},
            "/runs": {"POST": guarded(self.create_run)},
            "/runs/{run_id}": {"GET": guarded(self.get_run)},
        }
        routes: list[BaseRoute] = [Route(API + path, _by_method(methods), methods=ANY_METHOD)
                                   for path, methods in resources.items()]
        routes.append(Route(API + "/{rest:path}", _not_found, methods=ANY_METHOD))
        return routes

    def _guarded(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                client = await client_for_key(self.door.engine, bearer_token(request.headers))
                await self.limiter.take(client)
                return await handler(request, client)
            except Problem as problem:
                return problem.response(request.url.path)
            except Exception:
                log.exception("API handler failed", extra={"path": request.url.path})
                return Problem(500, "internal", "Something went wrong on the server; the "
                               "request can be retried.").response(request.url.path)

        return endpoint

    async def _body(self, request: Request, optional: bool = False) -> dict[str, Any]:
        return await json_object(request, self.max_body, optional=optional)

    # ------------------------------------------------------------------ handlers

    async def openapi(self, request: Request) -> Response:
        """The server's document; fetched with a valid key, under that client's
        guardrails and narrowed to its routes and agents."""
        settings = self.door.settings
        try:
            client = await client_for_key(self.door.engine, bearer_token(request.headers))
        except Problem:
            return JSONResponse(openapi_document(settings.api.ask_human))
        routes = [r for r in client.routes
                  if r in settings.routes and not settings.retired_route(r)]
        agents = [a for a in client.agents if settings.agent(a) is not None]
        return JSONResponse(openapi_document(settings.api.limits_for(client.name), routes,
                                             agents))

    async def me(self, request: Request, client: ApiClientInfo) -> Response:
        limits = self.door.settings.api.limits_for(client.name)
        return JSONResponse({"name": client.name, "routes": list(client.routes),
                             "agents": list(client.agents), "rate_limit": client.rate_limit,
                             "ask_human": limits.model_dump(mode="json")})

    async def create_request(self, request: Request, client: ApiClientInfo) -> Response:
        data = await self._body(request)
        view, created = await self.door.ask(client, data, request.headers.get("idempotency-key"),
                                            trace_context.from_headers(request.headers))
        return _created(request_json(view), created)

    async def create_approval(self, request: Request, client: ApiClientInfo) -> Response:
        data = await self._body(request)
        view, created = await self.door.approval(client, data,
                                                 request.headers.get("idempotency-key"),
                                                 trace_context.from_headers(request.headers))
        return _created(request_json(view), created)

    async def get_request(self, request: Request, client: ApiClientInfo) -> Response:
        wait = query_number(request.query_params.get("wait", "0"))
        if wait is None or not 0 <= wait <= MAX_WAIT_SECONDS:
            raise Problem(400, "bad-query", "wait must be a number of seconds from 0 to "
                          f"{MAX_WAIT_SECONDS:g}.")
        view = await self.door.get(client, request.path_params["ref"], wait)
        return JSONResponse(request_json(view))

    async def list_requests(self, request: Request, client: ApiClientInfo) -> Response:
        query = request.query_params
        limit = query_integer(query.get("limit", "50"))
        if limit is None:
            raise Problem(400, "bad-query", "limit must be a whole number (1-100).")
        views, cursor = await self.door.list(client, query.get("status"), query.get("route"),
                                             query.get("cursor"), limit)
        body: dict[str, Any] = {"items": [request_json(v) for v in views], "next_cursor": cursor}
        if cursor:
            params = {k: v for k, v in query.items() if k != "cursor"}
            params["cursor"] = cursor
            body["links"] = {"next": f"{API}/requests?" + "&".join(
                f"{k}={v}" for k, v in params.items())}
        return JSONResponse(body)

    async def cancel_request(self, request: Request, client: ApiClientInfo) -> Response:
        data = await self._body(request, optional=True)
        view = await self.door.cancel(client, request.path_params["ref"], data)
        return JSONResponse(request_json(view))

    async def answer_request(self, request: Request, client: ApiClientInfo) -> Response:
        data = await self._body(request)
        view = await self.door.answer(client, request.path_params["ref"], data)
        return JSONResponse(request_json(view))

    async def create_run(self, request: Request, client: ApiClientInfo) -> Response:
        data = await self._body(request)
        view = await self.door.start_run(client, data,
                                         trace_context.from_headers(request.headers))
        return JSONResponse(run_json(view), status_code=202,
                            headers={"Location": f"{API}/runs/{view.id}"})

    async def get_run(self, request: Request, client: ApiClientInfo) -> Response:
        view = await self.door.run(client, request.path_params["run_id"])
        return JSONResponse(run_json(view))


async def _not_found(request: Request) -> Response:
    return Problem(404, "not-found", f"There is no {request.url.path} in this API; see "
                   f"{API}/openapi.json.").response(request.url.path)


def _by_method(methods: dict[str, Endpoint]) -> Endpoint:
    allow = ", ".join(methods)

    async def endpoint(request: Request) -> Response:
        handler = methods.get(request.method)
        if handler is None:
            return Problem(405, "method-not-allowed", f"{request.method} is not allowed "
                           f"here; use {allow}.", headers={"Allow": allow},
                           ).response(request.url.path)
        return await handler(request)

    return endpoint


def _created(body: dict[str, Any], created: bool) -> Response:
    headers = {"Location": body["links"]["self"]}
    if not created:
        headers["Idempotent-Replayed"] = "true"
    return JSONResponse(body, status_code=201 if created else 200, headers=headers)
