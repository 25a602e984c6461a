"""``askhuman-client`` sends the caller's ``traceparent`` when a span is active, so the
request it creates (and the long-polls waiting for it) join the caller's trace."""

from __future__ import annotations

import asyncio

import httpx
from askhuman_client import AsyncClient, Client, wire
from opentelemetry.sdk.trace import TracerProvider
from sqlalchemy import select

from storage import HumanRequest
from tests.api.conftest import DEPLOY_ARGS, Door
from tests.api.conftest import Client as ApiKey

TRACER = TracerProvider().get_tracer("the caller")
"""Not the global provider: starting a span makes it current all the same."""


def ids_of(span: object) -> tuple[str, str]:
    context = span.get_span_context()  # type: ignore[attr-defined]
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


async def test_a_create_inside_a_span_joins_the_callers_trace(door: Door, ci: ApiKey) -> None:
    async with AsyncClient(door.url, ci.key) as client:
        with TRACER.start_as_current_span("agent step") as span:
            created = await client.create("ops", DEPLOY_ARGS)
        untraced = await client.create("ops", DEPLOY_ARGS)
    trace_id, span_id = ids_of(span)
    with door.database.read() as session:
        stored = {r.ref: r.trace_context for r in session.scalars(select(HumanRequest))}
    assert list(stored[created.ref] or {}) == ["traceparent"]
    assert str((stored[created.ref] or {})["traceparent"]).startswith(f"00-{trace_id}-{span_id}-")
    assert stored[untraced.ref] is None  # no active span: nothing sent


def test_every_call_carries_the_current_span_sync_and_async() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.method == "POST":
            return httpx.Response(201, json={"ref": "r1", "status": "pending"})
        return httpx.Response(200, json={"ref": "r1", "status": "pending"})

    with TRACER.start_as_current_span("graph node") as span:
        with Client("http://askhuman.test", "ahk_x",
                    transport=httpx.MockTransport(answer)) as client:
            client._call("POST", "/requests", json={}, headers={"Idempotency-Key": "k"})
            client._call("GET", "/requests/r1", params={"wait": 0})

        async def poll() -> None:
            async with AsyncClient("http://askhuman.test", "ahk_x",
                                   transport=httpx.MockTransport(answer)) as aclient:
                await aclient._call("GET", "/requests/r1", params={"wait": 0})

        asyncio.run(poll())
        assert wire.trace_headers()["traceparent"].startswith("00-")
    trace_id, span_id = ids_of(span)
    assert [str(r.headers.get("traceparent"))[:52] for r in seen] == \
        [f"00-{trace_id}-{span_id}"] * 3
    assert seen[0].headers["idempotency-key"] == "k"  # a call's own headers stay
    assert wire.trace_headers() == {}  # outside the span
    assert wire.with_trace(None) is None


def test_without_opentelemetry_nothing_is_sent(monkeypatch: object) -> None:
    """The import is optional: without opentelemetry-api the headers stay as they were."""
    monkeypatch.setattr(wire, "_trace", None)  # type: ignore[attr-defined]
    with TRACER.start_as_current_span("a span nobody can see"):
        assert wire.trace_headers() == {}
        assert wire.with_trace({"Idempotency-Key": "k"}) == {"Idempotency-Key": "k"}
