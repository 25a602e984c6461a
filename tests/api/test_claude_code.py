"""Claude Code's ``--permission-prompt-tool mcp__askhuman__request_approval``, as Claude
Code makes the call: ``askhuman mcp`` over stdio driven by the real ``mcp`` client SDK,
arguments ``{tool_name, input, tool_use_id}`` (plus the ``claudecode/toolUseId`` meta
Claude Code 2.1 sends), a click in the fake Slack, and the exact JSON text that Claude
Code parses: ``{"behavior": "allow", "updatedInput": …}`` (as asked, or as an approver
edited it) or ``{"behavior": "deny", "message": …}`` (who rejected it and why, or that
nobody answered before the deadline). ``docs/integrations/claude-code.md`` quotes it;
``test_claude_code_cli.py`` runs the real CLI when it is installed."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import jsonschema
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.api.conftest import Client, Door
from tests.api.test_mcp import ROOT, card_for, permission_answer
from tests.slack.conftest import ALICE, TEAM_ID

FIN = "C0FIN"
QUICK = "C0QUICK"
TOOL_USE_ID = "toolu_01D7FLrfh4GYq7yT1ULFeyMV"
COMMAND = {"command": "kubectl rollout restart deploy/web -n prod",
           "description": "Restart the web deployment"}


def claude_code_arguments(tool_name: str, tool_input: dict[str, Any],
                          tool_use_id: str = TOOL_USE_ID) -> dict[str, Any]:
    """The arguments Claude Code 2.1 passes to the permission-prompt tool (seen on the
    wire: ``{tool_name, input, tool_use_id}``)."""
    return {"tool_name": tool_name, "input": tool_input, "tool_use_id": tool_use_id}


async def ask(session: ClientSession, arguments: dict[str, Any]) -> asyncio.Task[Any]:
    meta: types.RequestParamsMeta = {"claudecode/toolUseId": arguments.get("tool_use_id")}
    return asyncio.create_task(session.call_tool("request_approval", arguments, meta=meta))


@asynccontextmanager
async def askhuman_mcp(door: Door, client: Client, *args: str) -> AsyncIterator[ClientSession]:
    """``askhuman mcp`` as ``.mcp.json`` starts it for Claude Code."""
    env = {**os.environ, "ASKHUMAN_API_KEY": client.key, "ASKHUMAN_URL": door.url,
           "PYTHONPATH": str(ROOT)}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "bot.cli", "mcp", "--progress-seconds", "0.3",
                                      *args], env=env, cwd=str(ROOT))
    async with stdio_client(params) as (read, write), \
            ClientSession(read, write, client_info=types.Implementation(
                name="claude-code", version="2.1.328")) as session:
        await session.initialize()
        yield session


async def click(door: Door, ts: str, label: str, reason: str | None = None,
                channel: str = FIN) -> None:
    """Click ``label`` on the card, with ``reason`` typed in its "Reason" box."""
    payload = door.slack.click_payload(ts, label, ALICE, environment=None, channel=channel)
    for block_id, value in payload["state"]["values"].items():
        if "reason" in block_id:
            next(iter(value.values()))["value"] = reason
    assert (await door.slack.interact(payload)).status_code == 200


async def edit_and_approve(door: Door, ts: str, edits: dict[str, str],
                           channel: str = FIN) -> None:
    """"Edit and approve" on the card, then the modal submitted with ``edits``."""
    slack = door.slack
    before = len(slack.fake.views)
    payload = slack.click_payload(ts, "Edit and approve", ALICE, environment=None,
                                  channel=channel)
    assert (await slack.interact(payload)).status_code == 200
    await slack.wait_until(lambda: len(slack.fake.views) > before, what="views.open")
    view = slack.fake.views[-1]
    values: dict[str, Any] = {}
    for block in view["blocks"]:
        if block["type"] == "input":  # one input per editable argument, by its label
            values[block["block_id"]] = {block["element"]["action_id"]: {
                "type": block["element"]["type"],
                "value": edits.get(block["label"]["text"], "")}}
    response = await slack.interact({
        "type": "view_submission", "team": {"id": TEAM_ID},
        "user": {"id": ALICE, "username": ALICE.lower(), "name": ALICE.lower()},
        "api_app_id": "A0APP", "trigger_id": "9.9.9", "response_urls": [],
        "view": {**view, "id": "V1", "team_id": TEAM_ID, "hash": "1.x",
                 "state": {"values": values}}})
    assert response.status_code == 200 and not response.content, response.text


async def test_claude_code_permission_prompt_over_stdio(door: Door, ci: Client) -> None:
    async with askhuman_mcp(door, ci, "--route", "fin", "--editable", "Bash:command") \
            as session:
        [tool] = [t for t in (await session.list_tools()).tools
                  if t.name == "request_approval"]
        # Claude Code's call, and one with properties a later version may add, both fit.
        jsonschema.validate(claude_code_arguments("Bash", COMMAND), tool.input_schema)
        jsonschema.validate({**claude_code_arguments("Bash", COMMAND),
                             "permission_suggestions": [{"type": "addRules"}]},
                            tool.input_schema)

        # Approve: the call runs as Claude asked.
        call = await ask(session, {**claude_code_arguments("Bash", COMMAND),
                                   "permission_suggestions": [{"type": "addRules"}]})
        ts = await card_for(door, "kubectl rollout restart", FIN)
        card = str(door.slack.card_message(ts, FIN).blocks)
        assert "Approve tool call: Bash" in card and "Edit and approve" in card
        await click(door, ts, "Approve")
        assert permission_answer(await asyncio.wait_for(call, 20)) == {
            "behavior": "allow", "updatedInput": COMMAND}

        # Edit and approve: Claude Code runs the command as the approver changed it.
        call = await ask(session, claude_code_arguments("Bash", {
            "command": "rm -rf /srv/cache/*", "description": "Clear the cache"}, "toolu_2"))
        ts = await card_for(door, "rm -rf /srv/cache/*", FIN)
        await edit_and_approve(door, ts, {"command": "rm -rf /srv/cache/web"})
        assert permission_answer(await asyncio.wait_for(call, 20)) == {
            "behavior": "allow", "updatedInput": {"command": "rm -rf /srv/cache/web",
                                                  "description": "Clear the cache"}}

        # Reject with a reason: Claude is told who said no, and why.
        call = await ask(session, claude_code_arguments(
            "Write", {"file_path": "/etc/hosts", "content": "10.0.0.1 db"}, "toolu_3"))
        ts = await card_for(door, "/etc/hosts", FIN)
        assert "Edit and approve" not in str(door.slack.card_message(ts, FIN).blocks)
        await click(door, ts, "Reject", "hosts is managed by Ansible")
        assert permission_answer(await asyncio.wait_for(call, 20)) == {
            "behavior": "deny",
            "message": "Rejected by u0alice in Slack: hosts is managed by Ansible"}

        # Reject without one.
        call = await ask(session, claude_code_arguments("Bash", {"command": "reboot"},
                                                        "toolu_4"))
        ts = await card_for(door, "reboot", FIN)
        await click(door, ts, "Reject")
        assert permission_answer(await asyncio.wait_for(call, 20)) == {
            "behavior": "deny", "message": "Rejected by u0alice in Slack (no reason given)."}


async def test_claude_code_permission_prompt_times_out_to_a_deny(
    door: Door, ci: Client
) -> None:
    async with askhuman_mcp(door, ci, "--route", "quick") as session:
        started = asyncio.get_running_loop().time()
        call = await ask(session, claude_code_arguments("Bash", COMMAND))
        answer = permission_answer(await asyncio.wait_for(call, 30))
        waited = asyncio.get_running_loop().time() - started
    listed = (await door.http.get(door.api("/requests"), headers=ci.headers)).json()
    [request] = listed["items"]
    assert request["status"] == "timeout"
    deadline = dt.datetime.fromisoformat(request["deadline"].replace("Z", "+00:00"))
    assert answer == {"behavior": "deny", "message": (
        "Nobody approved or rejected this Bash call before the approval deadline "
        f"({deadline:%Y-%m-%d %H:%M:%S} UTC), so it is not approved.")}
    assert waited < 15
    ts = await card_for(door, "kubectl rollout restart", QUICK)
    assert ts  # the card was posted, and nobody clicked it


async def test_editable_rules_over_http(door: Door, ci: Client) -> None:
    url = door.url + "/mcp?route=fin&editable=Bash:command"
    async with create_mcp_http_client(headers=ci.headers) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        call = await ask(session, claude_code_arguments("Bash", {"command": "make deploy"}))
        ts = await card_for(door, "make deploy", FIN)
        await edit_and_approve(door, ts, {"command": "make deploy-canary"})
        assert permission_answer(await asyncio.wait_for(call, 20)) == {
            "behavior": "allow", "updatedInput": {"command": "make deploy-canary"}}
    bad = await door.http.post(door.url + "/mcp?editable=Bash", headers=ci.headers, json={})
    assert bad.status_code == 400
    assert "editable 'Bash' is not TOOL:ARG" in bad.json()["detail"]


async def test_claude_code_exiting_withdraws_the_card(door: Door, ci: Client) -> None:
    """Claude Code stopped (Ctrl-C, its own timeout) while the card waits: the stdio
    server goes away with it, and the request is cancelled rather than left open."""
    async with askhuman_mcp(door, ci, "--route", "fin") as session:
        call = await ask(session, claude_code_arguments("Bash", COMMAND))
        await card_for(door, "kubectl rollout restart", FIN)
    call.cancel()
    view: dict[str, Any] = {}
    for _ in range(300):
        listed = (await door.http.get(door.api("/requests"), headers=ci.headers)).json()
        view = listed["items"][0]
        if view["status"] != "pending":
            break
        await asyncio.sleep(0.05)
    assert view["status"] == "cancelled", view
    assert "stopped waiting" in view["result"]["message"]


async def test_claude_code_permission_prompt_rejected_in_feishu(door: Door, ci: Client) -> None:
    """Route ``ops`` posts the card to Slack and Feishu; a Feishu reject decides."""
    async with askhuman_mcp(door, ci, "--route", "ops") as session:
        call = await ask(session, claude_code_arguments("Bash", COMMAND))
        card = await door.feishu_card()
        assert "kubectl rollout restart" in card.content
        listed = (await door.http.get(door.api("/requests"), headers=ci.headers)).json()
        ref = listed["items"][0]["ref"]
        clicked = await door.click_feishu(card, ref, "reject",
                                          form={"f_reason": "wait for the canary"})
        assert clicked.status_code == 200, clicked.text
        answer = permission_answer(await asyncio.wait_for(call, 20))
    decided = (await door.get(ci, ref)).json()["decided_by"]
    assert decided["platform"] == "feishu"
    by = f" by {decided['name']}" if decided.get("name") else ""  # no name: the fake's
    assert answer == {"behavior": "deny",                            # directory has none
                      "message": f"Rejected{by} in Feishu: wait for the canary"}
