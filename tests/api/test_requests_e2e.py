"""POST /api/v1/requests → cards in Slack and Feishu → a click → long-poll and webhook."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from sqlalchemy import func, select
from standardwebhooks import Webhook

from storage import HumanRequest, OutboxItem
from tests.api.conftest import (
    DEPLOY_ARGS,
    Client,
    Door,
    Receiver,
    add_client,
    make_settings,
    running_door,
)
from tests.fakes.asgi_server import serve_in_loop
from tests.fakes.feishu_api import FakeFeishuApi
from tests.fakes.slack_api import FakeSlackAPI
from tests.slack.conftest import ALICE, APPROVALS


async def test_create_click_long_poll_and_signed_webhook(door: Door, ci: Client) -> None:
    receiver = Receiver()
    async with serve_in_loop(receiver.app()) as hook_url:
        body = {"route": "ops", "args": DEPLOY_ARGS, "agent_name": "deployer",
                "context": {"thread_id": "t-42"}, "callback_url": hook_url + "/hook"}
        created = await door.create(ci, body)
        assert created.status_code == 201, created.text
        view = created.json()
        ref = view["ref"]
        assert view["status"] == "pending" and view["deadline"] and view["result"] is None
        assert view["links"]["self"] == f"/api/v1/requests/{ref}"
        assert created.headers["location"] == f"/api/v1/requests/{ref}"

        # The card reaches Slack and Feishu, showing who asks.
        ts = await door.slack.wait_for_card()
        card = await door.feishu_card()
        assert "ci-bot/deployer" in str(door.slack.card_message(ts).blocks)
        assert "Deploy v1.2.3?" in card.sent_content

        # A long-poll waits for the decision itself.
        poll = asyncio.create_task(door.get(ci, ref, wait=30))
        await asyncio.sleep(0.3)
        assert not poll.done()
        clicked = time.perf_counter()
        await door.approve_in_slack(ts)
        answer = await asyncio.wait_for(poll, 10)
        assert time.perf_counter() - clicked < 2.0
        got = answer.json()
        assert got["status"] == "submitted"
        assert got["result"] == {"status": "submitted",
                                 "action": {"id": "approve", "label": "Approve"},
                                 "values": {"environment": "production", "comment": "lgtm"},
                                 "message": None, "rendered_content": None}
        assert got["decided_by"]["user_id"] == ALICE
        assert got["context"] == {"thread_id": "t-42"}

        # The webhook arrives, signed per Standard Webhooks; verify with the library.
        [(headers, raw)] = await receiver.wait(1)
        event = Webhook(ci.secret).verify(raw, headers)
        assert headers["webhook-id"] == f"msg_{ref}"
        assert event["type"] == "request.resolved"
        assert event["data"]["ref"] == ref and event["data"]["result"] == got["result"]
        assert event["data"]["context"] == {"thread_id": "t-42"}
        # A forged or stale signature does not verify.
        forged = {**headers, "webhook-signature": "v1,AAAA"}
        try:
            Webhook(ci.secret).verify(raw, forged)
        except Exception as exc:
            assert "signature" in str(exc).lower()
        else:
            raise AssertionError("a forged signature verified")

    # The card shows the decision on both platforms.
    await door.slack.wait_until(lambda: door.slack.fake.calls_to("chat.update"), what="update")
    assert door.engine is not None
    states = await door.engine.outbox_states()
    assert states.get("done", 0) >= 3 and not states.get("failed")


async def test_feishu_click_decides_too(door: Door, ci: Client) -> None:
    created = await door.create(ci, {"route": "ops", "args": DEPLOY_ARGS})
    ref = created.json()["ref"]
    card = await door.feishu_card()
    await door.slack.wait_for_card()
    clicked = await door.click_feishu(card, ref, "reject",
                                      form={"f_environment": "o0", "f_comment": "not now"})
    assert clicked.status_code == 200, clicked.text
    answer = (await door.get(ci, ref, wait=10)).json()
    assert answer["result"]["action"]["id"] == "reject"
    assert answer["result"]["values"] == {"environment": "staging", "comment": "not now"}
    assert answer["decided_by"]["platform"] == "feishu"


async def test_idempotency_key_gives_one_request_and_one_card(door: Door, ci: Client) -> None:
    body = {"route": "fin", "args": DEPLOY_ARGS, "idempotency_key": "deploy-123"}
    first, second = await asyncio.gather(door.create(ci, body), door.create(ci, body))
    statuses = sorted([first.status_code, second.status_code])
    assert statuses == [200, 201], (first.text, second.text)
    assert first.json()["ref"] == second.json()["ref"]
    replay = await door.create(ci, body)
    assert replay.status_code == 200 and replay.headers["idempotent-replayed"] == "true"
    assert replay.json()["ref"] == first.json()["ref"]
    # The header form works the same way.
    by_header = await door.create(ci, {"route": "fin", "args": DEPLOY_ARGS},
                                  headers={"Idempotency-Key": "hdr-1"})
    again = await door.create(ci, {"route": "fin", "args": DEPLOY_ARGS},
                              headers={"Idempotency-Key": "hdr-1"})
    assert by_header.status_code == 201 and again.status_code == 200
    assert again.json()["ref"] == by_header.json()["ref"]
    # Same key, different body: a conflict, not a new card.
    changed = await door.create(ci, {**body, "args": {**DEPLOY_ARGS, "question": "Other?"}})
    assert changed.status_code == 409
    assert changed.headers["content-type"] == "application/problem+json"
    assert changed.json()["type"] == "urn:askhuman:problem:idempotency-conflict"
    await asyncio.sleep(0.3)
    cards = [c for c in door.slack.fake.calls_to("chat.postMessage") if c.body.get("blocks")]
    assert len(cards) == 2  # deploy-123 and hdr-1, once each
    with door.database.read() as session:
        assert session.scalar(select(func.count()).select_from(HumanRequest)) == 2
        delivered = session.scalar(select(func.count()).select_from(OutboxItem).where(
            OutboxItem.kind == "deliver_request"))
        assert delivered == 2


async def test_list_is_paginated_and_only_shows_own_requests(door: Door, ci: Client) -> None:
    other = add_client(door.database, "other", ["ops", "fin"])
    refs = [(await door.create(ci, {"route": route, "args": DEPLOY_ARGS})).json()["ref"]
            for route in ("ops", "fin", "fin")]
    foreign = (await door.create(other, {"route": "fin", "args": DEPLOY_ARGS})).json()["ref"]
    page = (await door.http.get(door.api("/requests"), params={"limit": 2},
                                headers=ci.headers)).json()
    assert [item["ref"] for item in page["items"]] == [refs[2], refs[1]]
    assert page["next_cursor"] and page["links"]["next"].startswith("/api/v1/requests?")
    rest = (await door.http.get(door.api("/requests"),
                                params={"limit": 2, "cursor": page["next_cursor"]},
                                headers=ci.headers)).json()
    assert [item["ref"] for item in rest["items"]] == [refs[0]] and rest["next_cursor"] is None
    fin = (await door.http.get(door.api("/requests"), params={"status": "open", "route": "fin"},
                               headers=ci.headers)).json()
    assert {item["ref"] for item in fin["items"]} == {refs[1], refs[2]}
    assert foreign not in {item["ref"] for item in fin["items"]}
    # Someone else's request does not exist for this client.
    assert (await door.get(ci, foreign)).status_code == 404
    bad = await door.http.get(door.api("/requests"), params={"status": "maybe"},
                              headers=ci.headers)
    assert bad.status_code == 400
    bad_cursor = await door.http.get(door.api("/requests"), params={"cursor": "!!"},
                                     headers=ci.headers)
    assert bad_cursor.status_code == 400


async def test_cancel_resolves_cancelled_once(door: Door, ci: Client) -> None:
    ref = (await door.create(ci, {"route": "fin", "args": DEPLOY_ARGS})).json()["ref"]
    ts = await door.slack.wait_for_card("C0FIN")
    late_click = door.slack.click_payload(ts, "Approve", ALICE, channel="C0FIN")
    cancel = await door.http.post(door.api(f"/requests/{ref}/cancel"),
                                  json={"reason": "superseded"}, headers=ci.headers)
    assert cancel.status_code == 200, cancel.text
    view = cancel.json()
    assert view["status"] == "cancelled" and view["result"]["status"] == "cancelled"
    assert "superseded" in view["result"]["message"]
    again = await door.http.post(door.api(f"/requests/{ref}/cancel"), headers=ci.headers)
    assert again.status_code == 409 and again.json()["status_now"] == "cancelled"
    # A late click changes nothing.
    assert (await door.slack.interact(late_click)).status_code == 200
    await asyncio.sleep(0.2)
    assert (await door.get(ci, ref)).json()["status"] == "cancelled"
    assert (await door.http.post(door.api("/requests/nope/cancel"),
                                 headers=ci.headers)).status_code == 404


async def test_long_poll_without_decision_returns_pending_after_wait(
    door: Door, ci: Client
) -> None:
    ref = (await door.create(ci, {"route": "fin", "args": DEPLOY_ARGS})).json()["ref"]
    started = time.perf_counter()
    view = (await door.get(ci, ref, wait=0.5)).json()
    assert view["status"] == "pending"
    assert 0.45 < time.perf_counter() - started < 3
    assert door.engine.waiters.count() == 0  # nothing left registered
    bad = await door.http.get(door.api(f"/requests/{ref}"), params={"wait": "soon"},
                              headers=ci.headers)
    assert bad.status_code == 400


async def test_approval_request_and_decision(door: Door, ci: Client) -> None:
    body = {"route": "fin", "tool_name": "Bash",
            "args": {"command": "rm -rf /tmp/build <!channel> ```", "timeout": 30},
            "reason": "clean the build dir"}
    created = await door.http.post(door.api("/approvals"), json=body, headers=ci.headers)
    assert created.status_code == 201, created.text
    ref = created.json()["ref"]
    assert created.json()["kind"] == "approval" and created.json()["decision"] is None
    ts = await door.slack.wait_for_card("C0FIN")
    blocks = str(door.slack.card_message(ts, "C0FIN").blocks)
    assert "Approve" in blocks and "Reject" in blocks and "rm -rf /tmp/build" in blocks
    assert "<!channel>" not in blocks  # untrusted args are escaped
    # The same tool-approval card embedded agents' tool calls get: tool, why, binding.
    assert "Approve tool call: Bash" in blocks and "clean the build dir" in blocks
    with door.database.transaction() as session:
        row = session.scalars(select(HumanRequest).where(HumanRequest.ref == ref)).one()
        assert row.kind == "tool_approval" and row.binding and len(row.binding) == 64
    payload = door.slack.click_payload(ts, "Reject", ALICE, environment=None, channel="C0FIN")
    assert (await door.slack.interact(payload)).status_code == 200
    view = (await door.get(ci, ref, wait=10)).json()
    assert view["decision"] == {"approved": False, "reason": "lgtm"}
    assert view["tool_name"] == "Bash"


async def test_runs_start_from_an_event_and_report_their_output(door: Door, ci: Client) -> None:
    started = await door.http.post(door.api("/runs"), json={"agent": "deploy",
                                                             "prompt": "ship v1.2.3"},
                                   headers=ci.headers)
    assert started.status_code == 202, started.text
    run_id = started.json()["id"]
    assert started.headers["location"] == f"/api/v1/runs/{run_id}"
    ts = await door.slack.wait_for_card()
    await door.approve_in_slack(ts)

    async def finished() -> dict[str, object]:
        for _ in range(300):
            view = (await door.http.get(door.api(f"/runs/{run_id}"), headers=ci.headers)).json()
            if view["status"] in ("succeeded", "failed"):
                return dict(view)
            await asyncio.sleep(0.05)
        raise AssertionError("the run did not finish")

    view = await finished()
    assert view["status"] == "succeeded" and "Deployed v1.2.3" in str(view["output"])
    assert len(view["requests"]) == 1  # type: ignore[arg-type]
    # The final answer is posted in the route's channel.
    await door.slack.wait_until(lambda: any(
        "Deployed v1.2.3" in str(c.body.get("text")) for c in
        door.slack.fake.calls_to("chat.postMessage") if c.body.get("channel") == APPROVALS),
        what="final answer in the route's channel")
    # Agents and routes outside the client's scope are refused; unknown runs are 404.
    denied = await door.http.post(door.api("/runs"), json={"agent": "other", "prompt": "x"},
                                  headers=ci.headers)
    assert denied.status_code == 403
    assert (await door.http.get(door.api("/runs/nope"), headers=ci.headers)).status_code == 404


async def test_answer_endpoint_never_answers_approvals(door: Door, ci: Client) -> None:
    approval = await door.http.post(door.api("/approvals"), headers=ci.headers, json={
        "route": "fin", "tool_name": "Bash", "args": {"command": "ls"}})
    ref = approval.json()["ref"]
    refused = await door.http.post(door.api(f"/requests/{ref}/answer"), headers=ci.headers,
                                   json={"action": "approve"})
    assert refused.status_code == 422
    assert "only be answered by approvers" in refused.json()["detail"]
    ask = (await door.create(ci, {"route": "fin", "args": DEPLOY_ARGS})).json()["ref"]
    invalid = await door.http.post(door.api(f"/requests/{ask}/answer"), headers=ci.headers,
                                   json={"action": "approve", "values": {}})
    assert invalid.status_code == 422  # environment is required
    answered = await door.http.post(door.api(f"/requests/{ask}/answer"), headers=ci.headers,
                                    json={"action": "approve",
                                          "values": {"environment": "staging"}})
    assert answered.status_code == 200, answered.text
    view = answered.json()
    assert view["decided_by"] == {"platform": "mcp", "user_id": "ci-bot",
                                  "name": "ci-bot (in the MCP client)"}
    assert (await door.get(ci, ref)).json()["status"] == "pending"


async def test_local_answers_can_be_turned_off(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], tmp_path: Path
) -> None:
    settings = make_settings(f"sqlite:///{tmp_path / 'off.db'}", local_answers=False)
    async with running_door(fake_slack, fake_feishu, settings) as door:
        client = add_client(door.database, "c", ["fin"])
        ref = (await door.create(client, {"route": "fin", "args": DEPLOY_ARGS})).json()["ref"]
        off = await door.http.post(door.api(f"/requests/{ref}/answer"), headers=client.headers,
                                   json={"action": "approve",
                                         "values": {"environment": "staging"}})
        assert off.status_code == 403
