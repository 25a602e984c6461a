"""What the MCP tools need from askhuman, in-process or over the HTTP API.

Both backends speak the API's JSON (``bot.api.views``) and raise ``BackendError``
with the API's status and problem detail, so the tools behave the same whether they
run inside ``askhuman serve`` (``LocalBackend``) or in ``askhuman mcp`` over stdio
(``RemoteBackend``).
"""

from __future__ import annotations

from typing import Any, Protocol

import httpx

from bot.api.problems import Problem
from bot.api.service import Door
from bot.api.views import API, request_json
from bot.askhuman.config import AskHumanConfig
from bot.engine.external import ApiClientInfo


class BackendError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class Backend(Protocol):
    client_name: str
    routes: tuple[str, ...]
    limits: AskHumanConfig

    async def ask(self, data: dict[str, Any]) -> dict[str, Any]: ...

    async def approval(self, data: dict[str, Any]) -> dict[str, Any]: ...

    async def get(self, ref: str, wait: float) -> dict[str, Any]: ...

    async def cancel(self, ref: str, reason: str) -> dict[str, Any]: ...

    async def answer(self, ref: str, action: str, values: dict[str, Any]) -> dict[str, Any]: ...


class LocalBackend:
    """The ``Door`` of this process, acting for one authenticated client."""

    def __init__(self, door: Door, client: ApiClientInfo,
                 trace: dict[str, Any] | None = None) -> None:
        self.door = door
        self.client = client
        self.trace = trace
        """The W3C trace context of the HTTP request carrying the tool call."""
        self.client_name = client.name
        self.routes = client.routes
        self.limits = door.settings.api.limits_for(client.name)

    async def ask(self, data: dict[str, Any]) -> dict[str, Any]:
        try:
            view, _created = await self.door.ask(self.client, data, trace=self.trace)
        except Problem as exc:
            raise BackendError(exc.status, exc.detail) from None
        return request_json(view)

    async def approval(self, data: dict[str, Any]) -> dict[str, Any]:
        try:
            view, _created = await self.door.approval(self.client, data, trace=self.trace)
        except Problem as exc:
            raise BackendError(exc.status, exc.detail) from None
        return request_json(view)

    async def get(self, ref: str, wait: float) -> dict[str, Any]:
        try:
            return request_json(await self.door.get(self.client, ref, wait))
        except Problem as exc:
            raise BackendError(exc.status, exc.detail) from None

    async def cancel(self, ref: str, reason: str) -> dict[str, Any]:
        try:
            return request_json(await self.door.cancel(self.client, ref, {"reason": reason}))
        except Problem as exc:
            raise BackendError(exc.status, exc.detail) from None

    async def answer(self, ref: str, action: str, values: dict[str, Any]) -> dict[str, Any]:
        try:
            view = await self.door.answer(self.client, ref, {"action": action, "values": values})
        except Problem as exc:
            raise BackendError(exc.status, exc.detail) from None
        return request_json(view)


class RemoteBackend:
    """The HTTP API of a running ``askhuman serve`` (for ``askhuman mcp`` over stdio)."""

    def __init__(self, base_url: str, key: str, timeout: float = 75.0) -> None:
        self.http = httpx.AsyncClient(base_url=base_url.rstrip("/"), timeout=timeout,
                                      headers={"Authorization": f"Bearer {key}"})
        self.client_name = ""
        self.routes: tuple[str, ...] = ()
        self.limits = AskHumanConfig()

    async def connect(self) -> None:
        """Check the key exactly as the API does (``GET /api/v1/me``) and learn the
        client's routes and limits; ``BackendError`` names what is wrong."""
        me = await self._call("GET", f"{API}/me")
        self.client_name = str(me["name"])
        self.routes = tuple(me.get("routes") or ())
        self.limits = AskHumanConfig.model_validate(me.get("ask_human") or {})

    async def close(self) -> None:
        await self.http.aclose()

    async def _call(self, method: str, path: str, json: dict[str, Any] | None = None,
                    params: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            response = await self.http.request(method, path, json=json, params=params)
        except httpx.HTTPError as exc:
            raise BackendError(503, f"cannot reach askhuman at {self.http.base_url}: "
                               f"{type(exc).__name__}") from None
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code >= 400:
            detail = body.get("detail") if isinstance(body, dict) else None
            raise BackendError(response.status_code, str(detail or response.reason_phrase))
        if not isinstance(body, dict):
            raise BackendError(502, "the server answered something that is not a JSON object")
        return body

    async def ask(self, data: dict[str, Any]) -> dict[str, Any]:
        return await self._call("POST", f"{API}/requests", data)

    async def approval(self, data: dict[str, Any]) -> dict[str, Any]:
        return await self._call("POST", f"{API}/approvals", data)

    async def get(self, ref: str, wait: float) -> dict[str, Any]:
        # The API refuses a wait over 60 s (400); a longer progress interval waits 60.
        return await self._call("GET", f"{API}/requests/{ref}",
                                params={"wait": min(max(wait, 0.0), 60.0)})

    async def cancel(self, ref: str, reason: str) -> dict[str, Any]:
        return await self._call("POST", f"{API}/requests/{ref}/cancel", {"reason": reason})

    async def answer(self, ref: str, action: str, values: dict[str, Any]) -> dict[str, Any]:
        return await self._call("POST", f"{API}/requests/{ref}/answer",
                                {"action": action, "values": values})
