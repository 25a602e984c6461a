"""The asynchronous client (the same calls as ``Client``, awaited)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from askhuman_client import wire
from askhuman_client.models import AskHumanResult, HumanRequest, RequestPage
from askhuman_client.wire import API, Retry


class AsyncClient:
    """``/api/v1`` of an askhuman server. Keeps its connections: ``close()`` it or use
    ``with``. Transport errors, 429 and 5xx are retried (``retry``) with the same
    idempotency key, so a retried create never makes a second card."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 75.0,
                 retry: Retry | None = None, transport: httpx.AsyncBaseTransport | None = None,
                 ) -> None:
        self.retry = retry or Retry()
        self.http = httpx.AsyncClient(base_url=base_url.rstrip("/"), timeout=timeout,
                                 headers=wire.headers(api_key), transport=transport)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        kwargs["headers"] = wire.with_trace(kwargs.get("headers"))  # the caller's trace
        attempt = 0
        while True:
            last: httpx.Response | None = None
            try:
                last = await self.http.request(method, API + path, **kwargs)
            except httpx.TransportError:
                if attempt + 1 >= self.retry.attempts:
                    raise
            else:
                if not wire.retryable(last) or attempt + 1 >= self.retry.attempts:
                    return wire.answer(last)
            await asyncio.sleep(self.retry.delay(attempt, last))
            attempt += 1

    async def create(self, route: str, args: dict[str, Any], *, idempotency_key: str | None = None,
               callback_url: str | None = None, context: dict[str, Any] | None = None,
               agent_name: str | None = None) -> HumanRequest:
        """Send an ask_human card (Dify v1 ``args``); returns the pending request."""
        body, extra = wire.create_body(idempotency_key, route=route, args=args,
                                       callback_url=callback_url, context=context,
                                       agent_name=agent_name)
        return HumanRequest.model_validate(await self._call("POST", "/requests", json=body,
                                                      headers=extra))

    async def request_approval(self, route: str, tool_name: str, args: dict[str, Any], *,
                         reason: str | None = None, editable: list[str] | None = None,
                         input_schema: dict[str, Any] | None = None,
                         idempotency_key: str | None = None, callback_url: str | None = None,
                         context: dict[str, Any] | None = None,
                         agent_name: str | None = None) -> HumanRequest:
        """Send an Approve / Reject card for a tool call; ``editable`` arguments may be
        changed by the approver (the result's ``updated_input``)."""
        body, extra = wire.create_body(idempotency_key, **wire.approval_fields(
            route, tool_name, args, reason, editable, input_schema, callback_url=callback_url,
            context=context, agent_name=agent_name))
        return HumanRequest.model_validate(await self._call("POST", "/approvals", json=body,
                                                      headers=extra))

    async def get(self, ref: str, *, wait: float = 0) -> HumanRequest:
        """The request now, or up to ``wait`` seconds (≤ 60) later if it is decided."""
        return HumanRequest.model_validate(
            await self._call("GET", f"/requests/{ref}", params={"wait": wait}))

    async def wait(self, ref: str, *, timeout: float | None = None) -> HumanRequest:
        """Long-poll until the request is resolved (or ``timeout`` seconds passed)."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if end is None else end - time.monotonic()
            request = await self.get(ref, wait=wire.wait_slice(remaining))
            if request.resolved or (remaining is not None and remaining <= 0):
                return request

    async def list(self, *, status: str | None = None, route: str | None = None, limit: int = 50,
             cursor: str | None = None) -> RequestPage:
        """One page of this client's requests, newest first."""
        return RequestPage.model_validate(await self._call(
            "GET", "/requests", params=wire.list_params(status, route, limit, cursor)))

    async def cancel(self, ref: str, reason: str = "") -> HumanRequest:
        return HumanRequest.model_validate(
            await self._call("POST", f"/requests/{ref}/cancel", json={"reason": reason}))

    async def ask(self, route: str, args: dict[str, Any], **kwargs: Any) -> AskHumanResult:
        """Create and wait: the person's answer (or the timeout result)."""
        request = await self.wait((await self.create(route, args, **kwargs)).ref)
        result = request.result
        assert result is not None  # a resolved request always carries its result
        return result

    async def approve(self, route: str, tool_name: str, args: dict[str, Any], **kwargs: Any
                ) -> HumanRequest:
        """Request an approval and wait; read ``.decision`` and ``.updated_input``."""
        created = await self.request_approval(route, tool_name, args, **kwargs)
        return await self.wait(created.ref)
