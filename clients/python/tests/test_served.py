"""The harness itself: a card appears for an approval, and Alice's clicks decide it."""

from __future__ import annotations

import asyncio

import pytest
from askhuman_client import Client, HumanRequest
from askhuman_client.verdicts import approve_call, approve_call_sync
from served import QUICK, Served


async def test_approve_and_reject_with_reason(askhuman: Served) -> None:
    async with askhuman.async_client() as client:
        asking = asyncio.create_task(approve_call(client, "agents", "deploy", {"v": "1.2"}))
        card = await askhuman.next_card()
        assert "deploy" in card.text and {"Approve", "Reject"} <= set(card.buttons)
        await askhuman.click(card, "Approve")
        verdict = await asyncio.wait_for(asking, 20)
        assert verdict.approved and verdict.args == {"v": "1.2"} and not verdict.edited

        asking = asyncio.create_task(approve_call(client, "agents", "deploy", {"v": "1.3"}))
        card = await askhuman.next_card()
        await askhuman.click(card, "Reject", reason="freeze until Monday")
        verdict = await asyncio.wait_for(asking, 20)
    assert not verdict.approved and "freeze until Monday" in verdict.message
    assert verdict.status == "submitted" and verdict.decided_by


async def test_edit_and_timeout(askhuman: Served) -> None:
    async with askhuman.async_client() as client:
        asking = asyncio.create_task(approve_call(
            client, "agents", "scale", {"service": "api", "replicas": 10},
            editable=["replicas"],
            input_schema={"type": "object", "properties": {"replicas": {"type": "integer"}}}))
        card = await askhuman.next_card()
        await askhuman.edit(card, {"replicas": 5})
        verdict = await asyncio.wait_for(asking, 20)
        assert verdict.approved and verdict.edited
        assert verdict.args == {"service": "api", "replicas": 5}

        verdict = await approve_call(client, "quick", "deploy", {"v": "9"})
        await askhuman.next_card(QUICK)
    assert not verdict.approved and verdict.status == "timeout"
    assert "No one answered" in verdict.message


def test_a_sync_approval_its_caller_abandons_is_withdrawn(askhuman: Served) -> None:
    class Impatient(Client):
        def wait(self, ref: str, *, timeout: float | None = None) -> HumanRequest:
            raise KeyboardInterrupt  # the person at the terminal gave up

    with Impatient(askhuman.url, askhuman.api_key) as client:
        with pytest.raises(KeyboardInterrupt):
            approve_call_sync(client, "agents", "deploy", {"v": "abandoned"})
        asyncio.run(askhuman.next_card())  # its card was posted (and is read here)
        newest = client.list(limit=1).items[0]
    assert newest.args and newest.status == "cancelled"
    assert newest.result is not None and newest.result.status == "cancelled"
