"""The MCP server with a real ``mcp`` ClientSession: over /mcp (Streamable HTTP) and over
stdio (``askhuman mcp`` in a subprocess), round trips through the fake Slack."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.session import ClientRequestContext, ElicitationFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.api.conftest import DEPLOY_ARGS, Client, Door, add_client
from tests.slack.conftest import ALICE

ROOT = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def mcp_http(door: Door, client: Client, route: str | None = None,
                   elicitation: ElicitationFnT | None = None) -> AsyncIterator[ClientSession]:
    url = door.url + "/mcp" + (f"?route={route}" if route else "")
    async with create_mcp_http_client(headers=client.headers) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write, elicitation_callback=elicitation) as session:
        await session.initialize()
        yield session


def permission_answer(result: types.CallToolResult) -> dict[str, Any]:
    """``request_approval``'s answer as Claude Code reads it: exactly one text block whose
    text is the JSON, and no ``structuredContent`` (Claude Code refuses a permission-prompt
    result that has one, and runs nothing)."""
    assert not result.is_error
    assert result.structured_content is None
    [block] = result.content
    assert isinstance(block, types.TextContent)
    answer: dict[str, Any] = json.loads(block.text)
    return answer


class Progress:
    def __init__(self) -> None:
        self.seen: list[tuple[float, float | None, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, total, message))


async def card_for(door: Door, text: str, channel: str = "C0APPROVALS") -> str:
    for _ in range(500):
        for message in list(door.slack.fake.messages.values()):
            if message.channel == channel and message.blocks and text in str(message.blocks):
                return str(message.ts)
        await asyncio.sleep(0.02)
    raise AssertionError(f"no card with {text!r} in {channel}")


async def click(door: Door, ts: str, label: str, channel: str = "C0APPROVALS") -> None:
    payload = door.slack.click_payload(ts, label, ALICE, environment="o1", channel=channel)
    assert (await door.slack.interact(payload)).status_code == 200


async def test_http_ask_human_round_trip_with_progress(door: Door, ci: Client) -> None:
    async with mcp_http(door, ci) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) == {"ask_human", "request_approval"}
        schema = tools["ask_human"].input_schema
        assert schema["required"] == ["question"] and "fields" in schema["properties"]
        assert "Allowed field types: paragraph, select" in (tools["ask_human"].description or "")
        progress = Progress()
        call = asyncio.create_task(session.call_tool("ask_human", DEPLOY_ARGS,
                                                     progress_callback=progress))
        ts = await card_for(door, "Deploy v1.2.3?")
        await asyncio.sleep(0.8)  # a few progress reports while nobody answers
        await click(door, ts, "Approve")
        result = await asyncio.wait_for(call, 15)
    assert not result.is_error
    assert result.structured_content == {
        "status": "submitted", "action": {"id": "approve", "label": "Approve"},
        "values": {"environment": "production", "comment": "lgtm"}, "message": None,
        "rendered_content": None}
    assert progress.seen and progress.seen[0][1] and progress.seen[0][1] > 1700
    assert "Waiting for a person on route 'ops'" in (progress.seen[0][2] or "")


async def test_http_request_approval_allow_and_deny(door: Door, ci: Client) -> None:
    async with mcp_http(door, ci, route="fin") as session:
        command = {"command": "kubectl delete pod web-1", "namespace": "prod"}
        allow = asyncio.create_task(session.call_tool("request_approval", {
            "tool_name": "Bash", "input": command, "tool_use_id": "toolu_1"}))
        ts = await card_for(door, "kubectl delete pod web-1", "C0FIN")
        await click(door, ts, "Approve", "C0FIN")
        allowed = await asyncio.wait_for(allow, 15)
        assert permission_answer(allowed) == {"behavior": "allow", "updatedInput": command}

        deny = asyncio.create_task(session.call_tool("request_approval", {
            "tool_name": "Bash", "input": {"command": "rm -rf /"}, "reason": "cleanup"}))
        ts = await card_for(door, "rm -rf /", "C0FIN")
        await click(door, ts, "Reject", "C0FIN")
        denied = await asyncio.wait_for(deny, 15)
    assert permission_answer(denied) == {"behavior": "deny",
                                         "message": "Rejected by u0alice in Slack: lgtm"}


async def test_http_refusals(door: Door, ci: Client) -> None:
    async with mcp_http(door, ci) as session:
        bad = await session.call_tool("ask_human", {**DEPLOY_ARGS, "fields": [
            {"type": "number", "name": "n", "label": "N"}]})
        assert bad.is_error
        assert isinstance(bad.content[0], types.TextContent)
        assert bad.content[0].text == ("ask_human field type 'number' is not allowed by this "
                                       "layer config")
        missing = await session.call_tool("request_approval", {"tool_name": "Bash"})
        assert missing.is_error
    unknown = Client(ci.info, "ahk_wrong", ci.secret)
    with pytest.raises(Exception):  # noqa: B017 - the SDK wraps the 401 in its own errors
        async with mcp_http(door, unknown):
            pass
    fin_only = add_client(door.database, "fin-only", ["fin"])
    response = await door.http.post(door.url + "/mcp?route=ops", headers=fin_only.headers,
                                    json={})
    assert response.status_code == 403
    assert response.headers["content-type"] == "application/problem+json"
    assert (await door.http.post(door.url + "/mcp", json={})).status_code == 401


async def test_http_local_answer_by_elicitation(door: Door, ci: Client) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def answer(context: ClientRequestContext,
                     params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={
            "action": "reject", "environment": "staging", "comment": "from my terminal"})

    async with mcp_http(door, ci, elicitation=answer) as session:
        result = await asyncio.wait_for(session.call_tool("ask_human", DEPLOY_ARGS), 15)
    assert result.structured_content is not None
    assert result.structured_content["action"] == {"id": "reject", "label": "Reject"}
    assert result.structured_content["values"] == {"environment": "staging",
                                                   "comment": "from my terminal"}
    [params] = asked
    assert isinstance(params, types.ElicitRequestFormParams)
    schema = params.requested_schema
    assert schema["required"] == ["action", "environment"]
    assert schema["properties"]["environment"]["oneOf"][1] == {"const": "production",
                                                               "title": "Production"}
    # The card shows who answered, and where.
    ts = await card_for(door, "Deploy v1.2.3?")
    await door.slack.wait_until(lambda: "in the MCP client" in str(
        door.slack.card_message(ts).blocks), what="card updated with the local answer")


async def test_http_declined_elicitation_still_waits_for_chat(door: Door, ci: Client) -> None:
    async def decline(context: ClientRequestContext,
                      params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with mcp_http(door, ci, elicitation=decline) as session:
        call = asyncio.create_task(session.call_tool("ask_human", DEPLOY_ARGS))
        ts = await card_for(door, "Deploy v1.2.3?")
        await asyncio.sleep(0.3)
        assert not call.done()
        await click(door, ts, "Approve")
        result = await asyncio.wait_for(call, 15)
    assert result.structured_content is not None
    assert result.structured_content["action"]["id"] == "approve"


async def test_abandoned_call_cancels_the_request(door: Door, ci: Client) -> None:
    async with mcp_http(door, ci) as session:
        call = asyncio.create_task(session.call_tool("ask_human", DEPLOY_ARGS))
        await card_for(door, "Deploy v1.2.3?")
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        listed: dict[str, Any] = {}
        for _ in range(200):
            listed = (await door.http.get(door.api("/requests"), headers=ci.headers)).json()
            if listed["items"][0]["status"] == "cancelled":
                break
            await asyncio.sleep(0.05)
    item = listed["items"][0]
    assert item["status"] == "cancelled"
    assert "stopped waiting" in item["result"]["message"]


async def test_stdio_round_trips(door: Door, ci: Client) -> None:
    env = {**os.environ, "ASKHUMAN_API_KEY": ci.key, "ASKHUMAN_URL": door.url,
           "PYTHONPATH": str(ROOT)}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "bot.cli", "mcp", "--route", "fin",
                                      "--progress-seconds", "0.3"], env=env, cwd=str(ROOT))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert names == {"ask_human", "request_approval"}
        progress = Progress()
        ask = asyncio.create_task(session.call_tool("ask_human", DEPLOY_ARGS,
                                                    progress_callback=progress))
        ts = await card_for(door, "Deploy v1.2.3?", "C0FIN")
        await asyncio.sleep(0.5)
        await click(door, ts, "Approve", "C0FIN")
        asked = await asyncio.wait_for(ask, 20)
        assert asked.structured_content is not None
        assert asked.structured_content["values"]["environment"] == "production"
        assert progress.seen
        approve = asyncio.create_task(session.call_tool("request_approval", {
            "tool_name": "Write", "input": {"path": "/etc/hosts"}}))
        ts = await card_for(door, "/etc/hosts", "C0FIN")
        await click(door, ts, "Reject", "C0FIN")
        denied = await asyncio.wait_for(approve, 20)
    assert permission_answer(denied) == {"behavior": "deny",
                                         "message": "Rejected by u0alice in Slack: lgtm"}


async def test_stdio_refuses_a_bad_key(door: Door) -> None:
    env = {**os.environ, "ASKHUMAN_API_KEY": "ahk_nope", "ASKHUMAN_URL": door.url,
           "PYTHONPATH": str(ROOT)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "mcp", env=env, cwd=str(ROOT),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    _out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    assert b"ASKHUMAN_API_KEY was refused" in err


async def test_ask_human_returns_the_timeout_result_at_the_deadline(
    door: Door, ci: Client
) -> None:
    async with mcp_http(door, ci, route="quick") as session:
        started = asyncio.get_running_loop().time()
        result = await asyncio.wait_for(session.call_tool("ask_human", DEPLOY_ARGS), 20)
        waited = asyncio.get_running_loop().time() - started
    assert result.structured_content == {
        "status": "timeout", "action": {"id": "__timeout", "label": "Timeout"}, "values": {},
        "message": "The human did not respond before the workflow timeout.",
        "rendered_content": None}
    assert 0.9 < waited < 10


async def test_chat_answer_wins_while_the_local_form_is_open(door: Door, ci: Client) -> None:
    opened = asyncio.Event()
    closed = asyncio.Event()

    async def never_answers(context: ClientRequestContext,
                            params: types.ElicitRequestParams) -> types.ElicitResult:
        opened.set()
        try:
            await asyncio.sleep(60)
        finally:
            closed.set()
        return types.ElicitResult(action="cancel")

    async with mcp_http(door, ci, elicitation=never_answers) as session:
        call = asyncio.create_task(session.call_tool("ask_human", DEPLOY_ARGS))
        ts = await card_for(door, "Deploy v1.2.3?")
        await asyncio.wait_for(opened.wait(), 10)
        await click(door, ts, "Approve")
        result = await asyncio.wait_for(call, 15)
        assert result.structured_content is not None
        assert result.structured_content["action"]["id"] == "approve"
        await asyncio.wait_for(closed.wait(), 5)  # the open form was withdrawn
