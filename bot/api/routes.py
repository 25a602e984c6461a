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
from bot.api.service import Door
from bot.api.views import API, request_json, run_json
from bot.engine.committer import log
from bot.engine.external import ApiClientInfo

Handler = Callable[[Request, ApiClientInfo], Awaitable[Response]]


class ApiRoutes:
    """The handlers, bound to one ``Door`` and rate limiter."""

    def __init__(self, door: Door, limiter: RateLimiter | None = None) -> None:
        self.door = door
        self.limiter = limiter or RateLimiter(door.engine)
        self.max_body = door.settings.api.max_body_bytes

    def routes(self) -> list[BaseRoute]:
        guarded = self._guarded
        return [
            Route(f"{API}/openapi.json", self.openapi, methods=["GET"]),
            Route(f"{API}/me", guarded(self.me), methods=["GET"]),
            Route(f"{API}/requests", guarded(self.create_request), methods=["POST"]),
            Route(f"{API}/requests", guarded(self.list_requests), methods=["GET"]),
            Route(f"{API}/requests/{{ref}}", guarded(self.get_request), methods=["GET"]),
            Route(f"{API}/requests/{{ref}}/cancel", guarded(self.cancel_request),
                  methods=["POST"]),
            Route(f"{API}/requests/{{ref}}/answer", guarded(self.answer_request),
                  methods=["POST"]),
            Route(f"{API}/approvals", guarded(self.create_approval), methods=["POST"]),
            Route(f"{API}/runs", guarded(self.create_run), methods=["POST"]),
            Route(f"{API}/runs/{{run_id}}", guarded(self.get_run), methods=["GET"]),
        ]

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
        return JSONResponse(openapi_document())

    async def me(self, request: Request, client: ApiClientInfo) -> Response:
        limits = self.door.settings.api.limits_for(client.name)
        return JSONResponse({"name": client.name, "routes": list(client.routes),
                             "agents": list(client.agents), "rate_limit": client.rate_limit,
                             "ask_human": limits.model_dump(mode="json")})

    async def create_request(self, request: Request, client: ApiClientInfo) -> Response:
        data = await self._body(request)
        view, created = await self.door.ask(client, data, request.headers.get("idempotency-key"))
        return _created(request_json(view), created)

    async def create_approval(self, request: Request, client: ApiClientInfo) -> Response:
        data = await self._body(request)
        view, created = await self.door.approval(client, data,
                                                 request.headers.get("idempotency-key"))
        return _created(request_json(view), created)

    async def get_request(self, request: Request, client: ApiClientInfo) -> Response:
        raw = request.query_params.get("wait", "0")
        try:
            wait = float(raw)
        except ValueError:
            raise Problem(400, "bad-query", "wait must be a number of seconds (0-60).") from None
        if wait != wait or wait < 0:
            raise Problem(400, "bad-query", "wait must be a number of seconds (0-60).")
        view = await self.door.get(client, request.path_params["ref"], wait)
        return JSONResponse(request_json(view))

    async def list_requests(self, request: Request, client: ApiClientInfo) -> Response:
        query = request.query_params
        try:
            limit = int(query.get("limit", "50"))
        except ValueError:
            raise Problem(400, "bad-query", "limit must be a whole number (1-100).") from None
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
        view = await self.door.start_run(client, data)
        return JSONResponse(run_json(view), status_code=202,
                            headers={"Location": f"{API}/runs/{view.id}"})

    async def get_run(self, request: Request, client: ApiClientInfo) -> Response:
        view = await self.door.run(client, request.path_params["run_id"])
        return JSONResponse(run_json(view))


def _created(body: dict[str, Any], created: bool) -> Response:
    headers = {"Location": body["links"]["self"]}
    if not created:
        headers["Idempotent-Replayed"] = "true"
    return JSONResponse(body, status_code=201 if created else 200, headers=headers)
