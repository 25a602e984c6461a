"""Traces: a request's spans join the caller's W3C trace, end to end through the door.

Spans go to the SDK's in-memory exporter through a provider handed to
``bot.engine.tracing.use`` for one test (the global OpenTelemetry provider can be set
once per process; this one is not global, so tests on one xdist worker never share it).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import select
from standardwebhooks import Webhook

from bot.engine import tracing
from bot.engine.trace_context import from_headers, valid_traceparent, valid_tracestate
from bot.settings import Settings
from storage import HumanRequest, Run
from tests.api.conftest import DEPLOY_ARGS, FIN, Client, Door, Receiver, make_settings
from tests.fakes.asgi_server import serve_in_loop
from tests.slack.conftest import ALICE


@pytest.fixture
def settings(db_url: str) -> Settings:
    """The door on SQLite, and on PostgreSQL when ``ASKHUMAN_TEST_POSTGRES_URL`` is set."""
    return make_settings(db_url)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use(provider)
    try:
        yield exporter
    finally:
        tracing.use(None)
        provider.shutdown()


def caller() -> tuple[str, str, str]:
    """A caller's span: (trace id, span id, its traceparent header)."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, span_id, f"00-{trace_id}-{span_id}-01"


def hex_ids(span: ReadableSpan) -> tuple[str, str | None]:
    """(trace id, parent span id) of ``span`` as hex."""
    context = span.get_span_context()
    assert context is not None
    parent = f"{span.parent.span_id:016x}" if span.parent is not None else None
    return f"{context.trace_id:032x}", parent


async def wait_spans(exporter: InMemorySpanExporter, names: dict[str, int],
                     timeout: float = 15.0) -> list[ReadableSpan]:
    """The finished spans once each name in ``names`` was seen at least that often."""
    deadline = time.monotonic() + timeout
    while True:
        done = list(exporter.get_finished_spans())
        counts = {name: sum(1 for s in done if s.name == name) for name in names}
        if all(counts[name] >= count for name, count in names.items()):
            return done
        if time.monotonic() > deadline:
            raise AssertionError(f"spans seen: {sorted(s.name for s in done)}")
        await asyncio.sleep(0.05)


def named(done: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in done if s.name == name]


async def test_a_request_click_and_webhook_are_one_trace(
    door: Door, ci: Client, spans: InMemorySpanExporter
) -> None:
    trace_id, parent_id, traceparent = caller()
    receiver = Receiver()
    async with serve_in_loop(receiver.app()) as hook_url:
        created = await door.create(ci, {"route": "ops", "args": DEPLOY_ARGS,
                                         "callback_url": hook_url + "/hook"},
                                    headers={"traceparent": traceparent,
                                             "tracestate": "vendor=abc"})
        assert created.status_code == 201, created.text
        ref = created.json()["ref"]
        ts = await door.slack.wait_for_card()
        await door.feishu_card()
        await door.approve_in_slack(ts)
        [(headers, raw)] = await receiver.wait(1)
        done = await wait_spans(spans, {
            "askhuman.request.raised": 1, "askhuman.request.delivered": 2,
            "askhuman.request.decided": 1, "askhuman.request.wait": 1,
            "askhuman.webhook.sent": 1})

    mine = [s for s in done if (s.attributes or {}).get("askhuman.request.ref") == ref]
    assert {s.name for s in mine} == {
        "askhuman.request.raised", "askhuman.request.delivered", "askhuman.request.decided",
        "askhuman.request.wait", "askhuman.webhook.sent"}
    for span in mine:  # every span is a child of the caller's span, in the caller's trace
        assert hex_ids(span) == (trace_id, parent_id), span.name

    # One delivered span per platform message, naming where the card went.
    delivered = named(mine, "askhuman.request.delivered")
    assert sorted(str((s.attributes or {})["askhuman.platform"]) for s in delivered) == [
        "feishu", "slack"]
    assert all((s.attributes or {}).get("askhuman.message.id") for s in delivered)

    [decided] = named(mine, "askhuman.request.decided")
    attributes = dict(decided.attributes or {})
    assert attributes["askhuman.decider"] == f"slack:{ALICE}"
    assert attributes["askhuman.route"] == "ops"
    assert attributes["askhuman.outcome"] == "submitted"
    assert attributes["askhuman.action"] == "approve"

    # The wait spans created → decided, from the stored times.
    [wait] = named(mine, "askhuman.request.wait")
    with door.database.read() as session:
        row = session.scalars(select(HumanRequest).where(HumanRequest.ref == ref)).one()
        created_at, decided_at = row.created_at, row.decided_at
        stored = row.trace_context
    assert stored == {"traceparent": traceparent, "tracestate": "vendor=abc"}
    assert decided_at is not None
    assert wait.start_time == tracing._ns(created_at)
    assert wait.end_time == tracing._ns(decided_at)
    assert (wait.attributes or {})["askhuman.outcome"] == "submitted"

    # The webhook carries the webhook span's context, and still verifies.
    [sent] = named(mine, "askhuman.webhook.sent")
    assert (sent.attributes or {})["http.response.status_code"] == 200
    assert (sent.attributes or {})["askhuman.webhook.attempt"] == 1
    context = sent.get_span_context()
    assert context is not None
    assert headers["traceparent"] == f"00-{trace_id}-{context.span_id:016x}-01"
    assert headers["tracestate"] == "vendor=abc"
    event = Webhook(ci.secret).verify(raw, headers)
    assert event["data"]["ref"] == ref


async def test_an_embedded_run_resumes_in_the_callers_trace(
    door: Door, ci: Client, spans: InMemorySpanExporter
) -> None:
    trace_id, parent_id, traceparent = caller()
    started = await door.http.post(door.api("/runs"), json={"agent": "deploy",
                                                             "prompt": "ship v1.2.3"},
                                   headers={**ci.headers, "traceparent": traceparent})
    assert started.status_code == 202, started.text
    run_id = started.json()["id"]
    ts = await door.slack.wait_for_card()
    await door.approve_in_slack(ts)
    done = await wait_spans(spans, {"askhuman.run.resumed": 1, "askhuman.request.wait": 1})

    [resumed] = named(done, "askhuman.run.resumed")
    assert hex_ids(resumed) == (trace_id, parent_id)
    attributes = dict(resumed.attributes or {})
    assert attributes["askhuman.run.id"] == run_id
    assert attributes["askhuman.agent"] == "deploy"
    assert attributes["askhuman.run.outcome"] == "output"
    assert resumed.status.is_ok
    # The run's request inherited the run's context: its spans share the trace.
    for name in ("askhuman.request.raised", "askhuman.request.decided",
                 "askhuman.request.wait"):
        [span] = named(done, name)
        assert hex_ids(span) == (trace_id, parent_id), name
    with door.database.read() as session:
        run = session.get(Run, run_id)
        assert run is not None and run.trace_context == {"traceparent": traceparent}


async def test_without_a_traceparent_the_raised_span_roots_the_requests_trace(
    door: Door, ci: Client, spans: InMemorySpanExporter
) -> None:
    created = await door.create(ci, {"route": "fin", "args": DEPLOY_ARGS},
                                headers={"traceparent": "00-not-a-trace-01"})
    assert created.status_code == 201, created.text  # malformed: ignored, not an error
    ref = created.json()["ref"]
    ts = await door.slack.wait_for_card(FIN)
    await door.approve_in_slack(ts, channel=FIN)
    done = await wait_spans(spans, {"askhuman.request.decided": 1, "askhuman.request.wait": 1})
    [raised] = named(done, "askhuman.request.raised")
    assert raised.parent is None  # a root: the caller sent no (valid) trace
    context = raised.get_span_context()
    assert context is not None
    for name in ("askhuman.request.delivered", "askhuman.request.decided",
                 "askhuman.request.wait"):
        [span] = named(done, name)
        assert hex_ids(span) == (f"{context.trace_id:032x}", f"{context.span_id:016x}")
    with door.database.read() as session:
        row = session.scalars(select(HumanRequest).where(HumanRequest.ref == ref)).one()
        stored = dict(row.trace_context or {})
    assert list(stored) == ["traceparent"]  # the raised span's, so later spans join it
    assert stored["traceparent"].startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")


async def test_a_malformed_traceparent_is_ignored_and_tracing_off_stores_only_valid_ones(
    door: Door, ci: Client
) -> None:
    assert not tracing.on()
    bad = await door.create(ci, {"route": "fin", "args": DEPLOY_ARGS},
                            headers={"traceparent": "00-" + "0" * 32 + "-" + "1" * 16 + "-01",
                                     "tracestate": "vendor=abc"})
    _, _, traceparent = caller()
    good = await door.create(ci, {"route": "fin", "args": DEPLOY_ARGS},
                             headers={"traceparent": traceparent,
                                      "tracestate": "bad state with spaces"})
    assert bad.status_code == good.status_code == 201
    with door.database.read() as session:
        stored = {r.ref: r.trace_context for r in session.scalars(select(HumanRequest))}
    assert stored[bad.json()["ref"]] is None
    assert stored[good.json()["ref"]] == {"traceparent": traceparent}  # tracestate dropped


@pytest.mark.parametrize(("header", "kept"), [
    ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
    (" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00 ",
     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"),
    ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future",  # a later version
     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
    ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", None),
    ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None),
    ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", None),
    ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", None),
    ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", None),  # upper case
    ("00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", None),
    ("", None),
    ("garbage", None),
])
def test_traceparent_validation(header: str, kept: str | None) -> None:
    assert valid_traceparent(header) == kept


def test_tracestate_validation() -> None:
    assert valid_tracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE") == \
        "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
    assert valid_tracestate("tenant@vendor=x, ,b=2") == "tenant@vendor=x,b=2"
    assert valid_tracestate("no-equals-sign") is None
    assert valid_tracestate("a=" + "x" * 600) is None
    assert valid_tracestate(",".join(f"k{i}=v" for i in range(33))) is None
    headers: dict[str, Any] = {"tracestate": "a=1"}
    assert from_headers(headers) is None  # tracestate alone means nothing


async def test_a_timeout_is_decided_by_the_system_in_the_callers_trace(
    door: Door, ci: Client, spans: InMemorySpanExporter
) -> None:
    trace_id, parent_id, traceparent = caller()
    created = await door.create(ci, {"route": "quick", "args": DEPLOY_ARGS},
                                headers={"traceparent": traceparent})
    assert created.status_code == 201, created.text
    done = await wait_spans(spans, {"askhuman.request.decided": 1, "askhuman.request.wait": 1})
    [decided] = named(done, "askhuman.request.decided")
    [wait] = named(done, "askhuman.request.wait")
    assert hex_ids(decided) == hex_ids(wait) == (trace_id, parent_id)
    attributes = dict(decided.attributes or {})
    assert attributes["askhuman.decider"] == "system"
    assert attributes["askhuman.outcome"] == "timeout"
    assert attributes["askhuman.request.ref"] == created.json()["ref"]
    assert wait.end_time is not None and wait.start_time is not None
    assert wait.end_time - wait.start_time >= 900_000_000  # the route's 1 s timeout


async def test_each_webhook_attempt_is_a_span_with_its_status(
    door: Door, ci: Client, spans: InMemorySpanExporter
) -> None:
    trace_id, parent_id, traceparent = caller()
    receiver = Receiver(status=503)
    async with serve_in_loop(receiver.app()) as hook_url:
        created = await door.create(ci, {"route": "fin", "args": DEPLOY_ARGS,
                                         "callback_url": hook_url + "/hook"},
                                    headers={"traceparent": traceparent})
        assert created.status_code == 201, created.text
        ts = await door.slack.wait_for_card(FIN)
        await door.approve_in_slack(ts, channel=FIN)
        await receiver.wait(1)
        receiver.status = 200
        got = await receiver.wait(2)
        done = await wait_spans(spans, {"askhuman.webhook.sent": 2})
    sent = sorted(named(done, "askhuman.webhook.sent"),
                  key=lambda s: int((s.attributes or {})["askhuman.webhook.attempt"]))
    assert [(s.attributes or {})["http.response.status_code"] for s in sent[:2]] == [503, 200]
    assert [(s.attributes or {})["askhuman.webhook.attempt"] for s in sent[:2]] == [1, 2]
    assert not sent[0].status.is_ok and sent[1].status.is_ok
    for span, (headers, _raw) in zip(sent[:2], got[:2], strict=True):
        assert hex_ids(span) == (trace_id, parent_id)
        context = span.get_span_context()
        assert context is not None
        assert headers["traceparent"] == f"00-{trace_id}-{context.span_id:016x}-01"


async def test_an_mcp_tool_call_over_http_keeps_its_traceparent(door: Door, ci: Client) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    _, _, traceparent = caller()
    headers = {**ci.headers, "traceparent": traceparent}
    async with create_mcp_http_client(headers=headers) as http, \
            streamable_http_client(door.url + "/mcp", http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        call = asyncio.create_task(session.call_tool("ask_human", DEPLOY_ARGS))
        ts = await door.slack.wait_for_card()
        with door.database.read() as stored:
            [context] = list(stored.scalars(select(HumanRequest.trace_context)))
        assert context == {"traceparent": traceparent}
        await door.approve_in_slack(ts)
        result = await asyncio.wait_for(call, 15)
    assert not result.is_error


async def test_an_approval_is_raised_as_a_tool_approval(
    door: Door, ci: Client, spans: InMemorySpanExporter
) -> None:
    trace_id, parent_id, traceparent = caller()
    created = await door.http.post(door.api("/approvals"), json={
        "route": "fin", "tool_name": "refund", "args": {"order": "A-17", "amount": 250}},
        headers={**ci.headers, "traceparent": traceparent})
    assert created.status_code == 201, created.text
    done = await wait_spans(spans, {"askhuman.request.raised": 1,
                                    "askhuman.request.delivered": 1})
    [raised] = named(done, "askhuman.request.raised")
    assert hex_ids(raised) == (trace_id, parent_id)
    assert (raised.attributes or {})["askhuman.request.kind"] == "tool_approval"
    assert (raised.attributes or {})["askhuman.agent"] == "ci-bot"


async def test_tracing_off_a_webhook_passes_the_callers_traceparent_on(
    door: Door, ci: Client
) -> None:
    assert not tracing.on()
    _, _, traceparent = caller()
    receiver = Receiver()
    async with serve_in_loop(receiver.app()) as hook_url:
        created = await door.create(ci, {"route": "fin", "args": DEPLOY_ARGS,
                                         "callback_url": hook_url + "/hook"},
                                    headers={"traceparent": traceparent,
                                             "tracestate": "vendor=abc"})
        assert created.status_code == 201, created.text
        ts = await door.slack.wait_for_card(FIN)
        await door.approve_in_slack(ts, channel=FIN)
        [(headers, raw)] = await receiver.wait(1)
    assert headers["traceparent"] == traceparent and headers["tracestate"] == "vendor=abc"
    assert Webhook(ci.secret).verify(raw, headers)["data"]["ref"] == created.json()["ref"]
