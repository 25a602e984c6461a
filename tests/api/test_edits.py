"""Approve with edits over the door: ``POST /api/v1/approvals`` with ``editable``, the
edit in Slack's modal, and the edited input back as ``updated_input`` (API) and
``updatedInput`` (MCP ``request_approval``, Claude Code's permission-prompt shape)."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.api.conftest import Client, Door
from tests.api.test_mcp import card_for, mcp_http, permission_answer
from tests.slack.conftest import ALICE
from tests.slack.test_tool_edits import _submission

FIN = "C0FIN"


async def _edit(door: Door, ts: str, replicas: str) -> dict[str, Any]:
    slack = door.slack
    payload = slack.click_payload(ts, "Edit and approve", ALICE, environment=None, channel=FIN)
    before = len(slack.fake.views)
    assert (await slack.interact(payload)).status_code == 200
    await slack.wait_until(lambda: len(slack.fake.views) > before, what="views.open")
    response = await slack.interact(_submission(slack.fake.views[-1], ALICE, replicas))
    return response.json() if response.content else {}


async def test_api_approval_with_edits_returns_updated_input(door: Door, ci: Client) -> None:
    body = {"route": "fin", "tool_name": "scale", "args": {"service": "api", "replicas": 10},
            "editable": ["replicas"],
            "input_schema": {"type": "object", "properties": {
                "service": {"type": "string"},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 20}}}}
    created = await door.http.post(door.api("/approvals"), json=body, headers=ci.headers)
    assert created.status_code == 201, created.text
    ref = created.json()["ref"]
    ts = await door.slack.wait_for_card(FIN)
    refused = await _edit(door, ts, "21")
    assert refused["response_action"] == "errors"
    assert "at most 20" in next(iter(refused["errors"].values()))
    assert (await door.get(ci, ref)).json()["status"] == "pending"  # nothing recorded

    assert await _edit(door, ts, "5") == {}
    view = (await door.get(ci, ref, wait=10)).json()
    assert view["decision"]["approved"] is True
    assert view["updated_input"] == {"service": "api", "replicas": 5}


async def test_api_editable_names_must_be_args(door: Door, ci: Client) -> None:
    body = {"route": "fin", "tool_name": "scale", "args": {"replicas": 10},
            "editable": ["cluster"]}
    refused = await door.http.post(door.api("/approvals"), json=body, headers=ci.headers)
    assert refused.status_code == 422 and "editable: cluster" in refused.text


async def test_plain_approval_returns_the_input_as_asked(door: Door, ci: Client) -> None:
    body = {"route": "fin", "tool_name": "scale", "args": {"replicas": 10}}
    created = await door.http.post(door.api("/approvals"), json=body, headers=ci.headers)
    ts = await door.slack.wait_for_card(FIN)
    assert "Edit and approve" not in door.slack.buttons(ts, FIN)
    payload = door.slack.click_payload(ts, "Approve", ALICE, environment=None, channel=FIN)
    assert (await door.slack.interact(payload)).status_code == 200
    view = (await door.get(ci, created.json()["ref"], wait=10)).json()
    assert view["updated_input"] == {"replicas": 10}


async def test_mcp_request_approval_returns_the_edited_input(door: Door, ci: Client) -> None:
    async with mcp_http(door, ci, route="fin") as session:
        call = asyncio.create_task(session.call_tool("request_approval", {
            "tool_name": "scale", "input": {"service": "web-7", "replicas": 10},
            "editable": ["replicas"]}))
        ts = await card_for(door, "web-7", FIN)
        assert await _edit(door, ts, "3") == {}
        allowed = await asyncio.wait_for(call, 15)
    assert permission_answer(allowed) == {"behavior": "allow",
                                          "updatedInput": {"service": "web-7", "replicas": 3}}
