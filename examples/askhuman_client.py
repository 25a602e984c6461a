"""A small client for the askhuman HTTP API (only needs ``httpx``).

    from askhuman_client import AskHuman
    with AskHuman("http://127.0.0.1:3000", api_key="ahk_…") as ask:
        result = ask.ask("ops", {"question": "Deploy v1.2.3?", "actions": [
            {"id": "approve", "label": "Approve", "style": "primary"},
            {"id": "reject", "label": "Reject", "style": "destructive"}]})
    print(result["status"], result.get("action"), result.get("values"))

``ask`` returns the ``AskHumanToolResult`` (Dify ask_human v1): status ``submitted``,
``timeout``, ``cancelled`` or ``unavailable``. It long-polls (the server answers the
moment a person decides) and is safe to call again after a crash with the same
``idempotency_key``: you get the same request back, never a second card. The client
keeps its connections open for reuse: ``close()`` it (or use ``with``) when done.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx


class AskHumanError(RuntimeError):
    """The API refused (problem+json ``detail`` is the message)."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        super().__init__(f"{status}: {problem.get('detail') or problem}")
        self.status = status
        self.problem = problem


class AskHuman:
    def __init__(self, base_url: str, api_key: str, timeout: float = 75.0) -> None:
        self.http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout,
                                 headers={"Authorization": f"Bearer {api_key}"})

    def close(self) -> None:
        """Close the pooled connections."""
        self.http.close()

    def __enter__(self) -> AskHuman:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = self.http.request(method, "/api/v1" + path, **kwargs)
        body = response.json() if response.content else {}
        if response.status_code >= 400:
            raise AskHumanError(response.status_code, body)
        return body

    def create(self, route: str, args: dict[str, Any], *, idempotency_key: str | None = None,
               callback_url: str | None = None, context: dict[str, Any] | None = None,
               agent_name: str | None = None) -> dict[str, Any]:
        """Send the card; returns the request (``ref``, ``status``, ``deadline``...)."""
        body = {"route": route, "args": args,
                "idempotency_key": idempotency_key or uuid.uuid4().hex}
        for key, value in (("callback_url", callback_url), ("context", context),
                           ("agent_name", agent_name)):
            if value is not None:
                body[key] = value
        return self._call("POST", "/requests", json=body)

    def approval(self, route: str, tool_name: str, args: dict[str, Any],
                 reason: str | None = None, *, idempotency_key: str | None = None
                 ) -> dict[str, Any]:
        body = {"route": route, "tool_name": tool_name, "args": args,
                "idempotency_key": idempotency_key or uuid.uuid4().hex}
        if reason:
            body["reason"] = reason
        return self._call("POST", "/approvals", json=body)

    def wait(self, ref: str) -> dict[str, Any]:
        """Long-poll until the request is resolved; returns the request."""
        while True:
            request = self._call("GET", f"/requests/{ref}", params={"wait": 60})
            if request["status"] != "pending":
                return request

    def ask(self, route: str, args: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Create and wait: the ``AskHumanToolResult``."""
        request = self.wait(self.create(route, args, **kwargs)["ref"])
        result: dict[str, Any] = request["result"]
        return result

    def approve(self, route: str, tool_name: str, args: dict[str, Any],
                reason: str | None = None, **kwargs: Any) -> tuple[bool, str]:
        """Ask for approval of a tool call and wait: ``(approved, reason)``."""
        request = self.wait(self.approval(route, tool_name, args, reason, **kwargs)["ref"])
        decision = request["decision"]
        return bool(decision["approved"]), str(decision["reason"])

    def cancel(self, ref: str, reason: str = "") -> dict[str, Any]:
        return self._call("POST", f"/requests/{ref}/cancel", json={"reason": reason})
