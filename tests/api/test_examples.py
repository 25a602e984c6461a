"""The Python client shown in docs/api.md (examples/askhuman_client.py) against a real server."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tests.api.conftest import DEPLOY_ARGS, Client, Door
from tests.slack.conftest import ALICE

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

from askhuman_client import AskHuman, AskHumanError


async def test_example_client_asks_and_approves(door: Door, ci: Client) -> None:
    with AskHuman(door.url, ci.key) as client:
        await _asks_and_approves(door, client)


async def _asks_and_approves(door: Door, client: AskHuman) -> None:
    ask = asyncio.create_task(asyncio.to_thread(
        client.ask, "ops", DEPLOY_ARGS, idempotency_key="example-1"))
    ts = await door.slack.wait_for_card()
    await door.approve_in_slack(ts)
    result = await asyncio.wait_for(ask, 20)
    assert result["status"] == "submitted" and result["action"]["id"] == "approve"

    approve = asyncio.create_task(asyncio.to_thread(
        client.approve, "fin", "refund", {"order": "A-17"}, "customer asked"))
    ts = await door.slack.wait_for_card("C0FIN")
    payload = door.slack.click_payload(ts, "Approve", ALICE, environment=None, channel="C0FIN")
    assert (await door.slack.interact(payload)).status_code == 200
    assert await asyncio.wait_for(approve, 20) == (True, "lgtm")

    try:
        await asyncio.to_thread(client.create, "nope", DEPLOY_ARGS)
    except AskHumanError as exc:
        assert exc.status == 403 and "may not use route" in str(exc)
    else:
        raise AssertionError("a foreign route was accepted")
