"""What the sync and async clients share: bodies, the retry policy, reading answers.

Retries keep the idempotency key: a create gets its key once, before the first try,
so a create retried after a lost answer returns the same request, never a second card.

Every call carries the caller's W3C ``traceparent`` (``tracestate``) when
``opentelemetry-api`` is importable and a span is active (``trace_headers``), so the
request, its webhook and the long-polls join the caller's trace. Without it, nothing
is sent and nothing else changes: the import is optional.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from askhuman_client.errors import AskHumanError, error_for, retry_after

API = "/api/v1"
MAX_WAIT = 60.0
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Retry:
    """Up to ``attempts`` tries; ``backoff * 2**n`` seconds between (capped), or the
    server's ``Retry-After`` when it is longer."""

    attempts: int = 4
    backoff: float = 0.5
    max_delay: float = 30.0

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        wait = min(self.max_delay, self.backoff * 2 ** attempt)
        hinted = retry_after(response) if response is not None else None
        return float(min(self.max_delay, max(wait, hinted or 0.0)))


def headers(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}", "Accept": "application/json"}


try:  # optional: the client needs only httpx and pydantic
    from opentelemetry import propagate as _propagate
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - exercised where opentelemetry is absent
    _propagate = None  # type: ignore[assignment]
    _trace = None  # type: ignore[assignment]


def trace_headers() -> dict[str, str]:
    """``traceparent`` / ``tracestate`` of the current span ({} without opentelemetry-api
    or an active, valid span). Uses the global propagator, as instrumented code does."""
    if _trace is None or not _trace.get_current_span().get_span_context().is_valid:
        return {}
    carrier: dict[str, str] = {}
    _propagate.inject(carrier)
    return {k: v for k, v in carrier.items() if k in ("traceparent", "tracestate")}


def with_trace(extra: dict[str, str] | None) -> dict[str, str] | None:
    """``extra`` headers plus the caller's trace context (a call's own headers win)."""
    traced = trace_headers()
    if not traced:
        return extra
    return {**traced, **(extra or {})}


def create_body(key: str | None, **fields: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The JSON body (Nones dropped) and its headers, with a key made once if none given."""
    body = {name: value for name, value in fields.items() if value is not None}
    body["idempotency_key"] = key or uuid.uuid4().hex
    return body, {"Idempotency-Key": body["idempotency_key"]}


def approval_fields(route: str, tool_name: str, args: dict[str, Any], reason: str | None,
                    editable: list[str] | None, input_schema: dict[str, Any] | None,
                    **common: Any) -> dict[str, Any]:
    return {"route": route, "tool_name": tool_name, "args": args, "reason": reason,
            "editable": editable or None, "input_schema": input_schema, **common}


def list_params(status: str | None, route: str | None, limit: int,
                cursor: str | None) -> dict[str, str | int]:
    params: dict[str, str | int] = {"limit": limit}
    for name, value in (("status", status), ("route", route), ("cursor", cursor)):
        if value is not None:
            params[name] = value
    return params


def retryable(response: httpx.Response) -> bool:
    return response.status_code in RETRY_STATUSES


def answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON of a 2xx, or the typed exception of the problem it reports."""
    if response.status_code >= 400:
        raise error_for(response)
    data = response.json() if response.content else {}
    if not isinstance(data, dict):
        raise AskHumanError(response.status_code, "about:blank", "Unexpected body",
                            f"expected a JSON object, got {type(data).__name__}")
    return data


def wait_slice(remaining: float | None) -> float:
    return MAX_WAIT if remaining is None else max(0.0, min(MAX_WAIT, remaining))

