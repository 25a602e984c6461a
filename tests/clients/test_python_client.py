"""``askhuman-client`` (clients/python) against a served askhuman with the Slack fake:
the calls, the typed errors, retries that keep the idempotency key, webhook checks."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from askhuman_client import (
    AsyncClient,
    Client,
    IdempotencyConflict,
    NotFound,
    RateLimited,
    Unauthorized,
    ValidationFailed,
    WebhookVerificationError,
    verify_webhook,
)
from askhuman_client.wire import Retry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.api.conftest import DEPLOY_ARGS, Door, Receiver, add_client
from tests.api.conftest import Client as ApiKey
from tests.api.test_edits import _edit
from tests.fakes.asgi_server import serve_in_loop
from tests.slack.conftest import ALICE, APPROVALS

FIN = "C0FIN"
QUICK_RETRY = Retry(attempts=3, backoff=0.01, max_delay=0.05)


def cards(door: Door, channel: str) -> set[str]:
    return {m.ts for m in list(door.slack.fake.messages.values())
            if m.channel == channel and m.blocks}


async def click(door: Door, channel: str, label: str, environment: str | None = None,
                old: frozenset[str] = frozenset()) -> None:
    """Click ``label`` on the card in ``channel`` that is not one of the ``old`` ones."""
    deadline = asyncio.get_running_loop().time() + 10
    while not (fresh := cards(door, channel) - old):
        assert asyncio.get_running_loop().time() < deadline, f"no new card in {channel}"
        await asyncio.sleep(0.02)
    ts = fresh.pop()
    payload = door.slack.click_payload(ts, label, ALICE, environment=environment, channel=channel)
    assert (await door.slack.interact(payload)).status_code == 200


async def test_sync_create_wait_list_cancel(door: Door, ci: ApiKey) -> None:
    with Client(door.url, ci.key) as client:
        created = await asyncio.to_thread(client.create, "ops", DEPLOY_ARGS,
                                          context={"thread": "t-1"})
        assert created.status == "pending" and created.context == {"thread": "t-1"}
        waiting = asyncio.create_task(asyncio.to_thread(client.wait, created.ref))
        await click(door, APPROVALS, "Approve", "o1")
        decided = await asyncio.wait_for(waiting, 20)
        assert decided.status == "submitted" and decided.result is not None
        assert decided.result.action is not None and decided.result.action.id == "approve"
        assert decided.decided_by and decided.decided_at is not None

        second = await asyncio.to_thread(client.create, "ops", DEPLOY_ARGS)
        cancelled = await asyncio.to_thread(client.cancel, second.ref, "not needed")
        assert cancelled.status == "cancelled"
        first = await asyncio.to_thread(client.list, limit=1)
        assert [r.ref for r in first.items] == [second.ref] and first.next_cursor
        rest = await asyncio.to_thread(client.list, limit=1, cursor=first.next_cursor)
        assert [r.ref for r in rest.items] == [created.ref]


async def test_async_ask_and_approvals(door: Door, ci: ApiKey) -> None:
    async with AsyncClient(door.url, ci.key) as client:
        asking = asyncio.create_task(client.ask("ops", DEPLOY_ARGS))
        await click(door, APPROVALS, "Reject", "o1")
        result = await asyncio.wait_for(asking, 20)
        assert result.status == "submitted" and result.action and result.action.id == "reject"

        approving = asyncio.create_task(client.approve("fin", "refund", {"order": "A-17"},
                                                       reason="customer asked"))
        await click(door, FIN, "Approve")
        approved = await asyncio.wait_for(approving, 20)
        assert approved.decision is not None and approved.decision.approved is True
        assert approved.updated_input == {"order": "A-17"} and approved.tool_name == "refund"

        old = frozenset(cards(door, FIN))
        rejecting = asyncio.create_task(client.approve("fin", "refund", {"order": "B-2"}))
        await click(door, FIN, "Reject", old=old)
        rejected = await asyncio.wait_for(rejecting, 20)
        assert rejected.decision is not None and rejected.decision.approved is False
        assert rejected.updated_input is None


async def test_edited_approval_returns_updated_input(door: Door, ci: ApiKey) -> None:
    schema = {"type": "object", "properties": {"service": {"type": "string"},
                                               "replicas": {"type": "integer", "maximum": 20}}}
    async with AsyncClient(door.url, ci.key) as client:
        created = await client.request_approval("fin", "scale", {"service": "api", "replicas": 10},
                                                editable=["replicas"], input_schema=schema)
        ts = await door.slack.wait_for_card(FIN)
        assert await _edit(door, ts, "5") == {}
        decided = await client.wait(created.ref, timeout=10)
    assert decided.decision is not None and decided.decision.approved
    assert decided.updated_input == {"service": "api", "replicas": 5}


async def test_errors_are_typed(door: Door, ci: ApiKey) -> None:
    async with AsyncClient(door.url, ci.key) as client:
        with pytest.raises(NotFound) as missing:
            await client.get("no-such-ref")
        assert missing.value.status == 404 and missing.value.type.endswith(":not-found")
        assert missing.value.title and missing.value.detail
        with pytest.raises(ValidationFailed) as bad:
            await client.request_approval("fin", "scale", {"replicas": 1}, editable=["cluster"])
        assert "editable: cluster" in bad.value.detail and bad.value.errors
        await client.create("ops", DEPLOY_ARGS, idempotency_key="same")
        with pytest.raises(IdempotencyConflict):
            await client.create("ops", {**DEPLOY_ARGS, "question": "Other?"},
                                idempotency_key="same")
    async with AsyncClient(door.url, "ahk_wrong") as stranger:
        with pytest.raises(Unauthorized) as refused:
            await stranger.list()
        assert refused.value.status == 401


class Counting(httpx.AsyncHTTPTransport):
    """Counts what the client really sent (each retry is a request)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        return await super().handle_async_request(request)


async def test_rate_limited_is_retried_then_raised(door: Door) -> None:
    limited = add_client(door.database, "tight", ["ops"], rate_limit=1)
    transport = Counting()
    async with AsyncClient(door.url, limited.key, retry=QUICK_RETRY,
                           transport=transport) as client:
        await client.list()
        with pytest.raises(RateLimited) as refused:
            await client.list()
    assert len(transport.sent) == 1 + QUICK_RETRY.attempts
    assert refused.value.status == 429 and refused.value.retry_after is not None
    assert refused.value.retry_after > 0


async def test_lost_answer_is_retried_with_the_same_key(door: Door, ci: ApiKey) -> None:
    """A stand-in in front of the server lets the first create through but answers 503
    (the answer is lost); the retry carries the same key and gets the same request."""
    keys: list[tuple[str | None, str | None]] = []

    async def flaky(request: Request) -> Response:
        body = await request.body()
        keys.append((request.headers.get("idempotency-key"),
                     (await request.json()).get("idempotency_key")))
        upstream = await door.http.post(door.api("/requests"), content=body,
                                        headers={"Authorization": request.headers["authorization"],
                                                 "Content-Type": "application/json"})
        if len(keys) == 1:
            return JSONResponse({"title": "Service unavailable", "status": 503}, 503)
        return Response(upstream.content, upstream.status_code,
                        media_type=upstream.headers["content-type"])

    stand_in = Starlette(routes=[Route("/api/v1/requests", flaky, methods=["POST"])])
    async with serve_in_loop(stand_in) as url, \
            AsyncClient(url, ci.key, retry=QUICK_RETRY) as client:
        created = await client.create("ops", DEPLOY_ARGS)
    assert len(keys) == 2 and keys[0] == keys[1] and keys[0][0] == keys[0][1] is not None
    async with AsyncClient(door.url, ci.key) as direct:
        stored = await direct.list()
    assert [r.ref for r in stored.items] == [created.ref]
    assert created.idempotency_key == keys[0][0]


async def test_webhook_verification(door: Door, ci: ApiKey) -> None:
    receiver = Receiver()
    async with serve_in_loop(receiver.app()) as url, AsyncClient(door.url, ci.key) as client:
        created = await client.create("ops", DEPLOY_ARGS, callback_url=url + "/hook")
        await click(door, APPROVALS, "Approve", "o1")
        headers, body = (await receiver.wait())[0]
    event = verify_webhook(ci.secret, body, headers)
    assert event.type == "request.resolved" and event.data.ref == created.ref
    assert event.data.status == "submitted"
    tampered = body.replace(b'"submitted"', b'"cancelled"', 1)
    with pytest.raises(WebhookVerificationError):
        verify_webhook(ci.secret, tampered, headers)
    with pytest.raises(WebhookVerificationError):
        verify_webhook("whsec_" + "A" * 32, body, headers)
