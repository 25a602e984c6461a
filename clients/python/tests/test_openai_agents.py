"""The OpenAI Agents SDK's tool approvals, answered by people through a served askhuman.

The real SDK runs a real agent whose model is the SDK's own ``ScriptedModel`` (an
implementation of its ``Model`` interface that returns scripted function calls and a
final message, and records every input it was given): no network, no key, no tracing.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, RunState, function_tool, set_tracing_disabled
from agents.items import ToolApprovalItem
from agents.testing import ScriptedModel, assistant_message, function_call
from askhuman_client import AsyncClient, Forbidden, HumanRequest
from askhuman_client.openai_agents import (
    approve_interruptions,
    call_arguments,
    record_verdict,
    run_with_approvals,
)
from askhuman_client.verdicts import verdict_of

set_tracing_disabled(True)
RUN_CONFIG = RunConfig(tracing_disabled=True)
DOCS = Path(__file__).resolve().parents[3] / "docs" / "integrations" / "openai-agents.md"


class Shop:
    """A refund tool that needs approval, and what it really did."""

    def __init__(self) -> None:
        self.refunded: list[tuple[str, int]] = []

        @function_tool(needs_approval=True)
        def refund(order: str, amount: int) -> str:
            """Refund part of an order."""
            self.refunded.append((order, amount))
            return f"Refunded {amount} on {order}."

        self.refund = refund

    def agent(self, model: ScriptedModel) -> Agent[Any]:
        return Agent(name="Refund agent", instructions="Refund what the user asks.",
                     model=model, tools=[self.refund])


def _refund(order: str, amount: int, call_id: str) -> Any:
    return function_call("refund", {"order": order, "amount": amount}, call_id=call_id)


def _outputs(model: ScriptedModel) -> dict[str, str]:
    """What the model read back for each call on its last turn, by call id."""
    assert model.last_call is not None
    return {item["call_id"]: item["output"] for item in model.last_call.input
            if isinstance(item, dict) and item.get("type") == "function_call_output"}


def _shown(card: Any) -> str:
    """Everything the card shows a person (the arguments are in its blocks)."""
    return json.dumps(card.blocks, ensure_ascii=False)


async def _alice(askhuman: Any, label: str, reason: str | None = None) -> Any:
    """Alice, in Slack: waits for the next card in the agents' channel and clicks."""
    card = await askhuman.next_card(channel="C0AGENTS")
    await askhuman.click(card, label, reason=reason)
    return card


async def _request(client: Any, route: str, call_id: str) -> HumanRequest:
    """The askhuman request made for the SDK call ``call_id`` (kept in its context)."""
    page = await client.list(route=route, limit=20)
    return next(request for request in page.items
                if (request.context or {}).get("openai_agents_call_id") == call_id)


# ---------------------------------------------------------------- approve, reject


async def test_the_run_pauses_then_an_approval_runs_the_call(askhuman: Any) -> None:
    shop = Shop()
    model = ScriptedModel([[_refund("A-17", 250, "call-a")], [assistant_message("Done: A-17.")]])
    agent = shop.agent(model)
    alice = asyncio.create_task(_alice(askhuman, "Approve"))
    async with AsyncClient(askhuman.url, askhuman.api_key) as client:
        # docs: begin one-pause
        paused = await Runner.run(agent, "Refund 250 on A-17", run_config=RUN_CONFIG)
        assert paused.final_output is None and paused.interruptions    # the run waits
        state = await approve_interruptions(paused, client, "agents")   # people answer
        result = await Runner.run(agent, state, run_config=RUN_CONFIG)  # and it goes on
        # docs: end one-pause
    card = await alice
    assert "refund" in card.text and "Refund-agent" in card.text
    assert "*order*: A-17" in _shown(card) and "*amount*: 250" in _shown(card)
    assert "Call hash" in _shown(card)
    assert "Edit and approve" not in card.buttons  # the SDK cannot run an edited call
    assert [item.call_id for item in paused.interruptions] == ["call-a"]
    assert shop.refunded == [("A-17", 250)]
    assert result.final_output == "Done: A-17." and not result.interruptions
    assert _outputs(model) == {"call-a": "Refunded 250 on A-17."}


async def test_a_reject_reason_reaches_the_model(askhuman: Any) -> None:
    model = ScriptedModel([[_refund("A-17", 9000, "call-r")], [assistant_message("Not refunded.")]])
    alice = asyncio.create_task(_alice(askhuman, "Reject", reason="Over the 500 refund limit"))
    url, api_key = askhuman.url, askhuman.api_key
    # docs: begin whole-run
    refunded: list[tuple[str, int]] = []

    @function_tool(needs_approval=True)
    def refund(order: str, amount: int) -> str:
        """Refund part of an order."""
        refunded.append((order, amount))
        return f"Refunded {amount} on {order}."

    agent = Agent(name="Refund agent", instructions="Refund what the user asks.",
                  model=model, tools=[refund])
    async with AsyncClient(url, api_key) as client:
        result = await run_with_approvals(agent, "Refund 9000 on A-17", client=client,
                                          route="agents", run_config=RUN_CONFIG)
    print(result.final_output)
    # docs: end whole-run
    await alice
    assert refunded == []
    assert result.final_output == "Not refunded."
    told = _outputs(model)["call-r"]
    assert told.startswith("Rejected by ") and told.endswith(": Over the 500 refund limit")


def test_the_docs_show_the_tested_code() -> None:
    """Each snippet between ``# docs:`` markers above is on the docs page, verbatim."""
    page = DOCS.read_text(encoding="utf-8")
    source = Path(__file__).read_text(encoding="utf-8")
    for name in ("whole-run", "one-pause"):
        body = source.split(f"# docs: begin {name}\n")[1].split("# docs: end")[0]
        snippet = textwrap.dedent(body.rsplit("\n", 1)[0] + "\n")
        assert snippet in page, name


# ---------------------------------------------------------------- nobody decided


async def test_a_timeout_is_a_reject_that_says_nobody_answered(askhuman: Any) -> None:
    shop = Shop()
    model = ScriptedModel([[_refund("A-17", 250, "call-t")], [assistant_message("Timed out.")]])
    async with askhuman.async_client() as client:
        result = await run_with_approvals(shop.agent(model), "Refund", client=client,
                                          route="quick", request_context={"ticket": "T-9"},
                                          run_config=RUN_CONFIG)
        request = await _request(client, "quick", "call-t")
    card = await askhuman.next_card(channel="C0QUICK")  # what people see now
    assert card.text.startswith("Timed out") and card.buttons == []
    assert request.context == {"ticket": "T-9", "openai_agents_call_id": "call-t"}
    assert shop.refunded == [] and result.final_output == "Timed out."
    assert request.status == "timeout"
    assert _outputs(model)["call-t"] == (
        f"No one answered the approval request {request.ref} in time; the call was not run.")


async def test_a_cancelled_request_is_a_reject_that_says_so(askhuman: Any) -> None:
    shop = Shop()
    model = ScriptedModel([[_refund("A-17", 250, "call-c")], [assistant_message("Cancelled.")]])
    async with askhuman.async_client() as client:
        running = asyncio.create_task(run_with_approvals(
            shop.agent(model), "Refund", client=client, route="agents",
            agent_name="refunds-bot", run_config=RUN_CONFIG))
        card = await askhuman.next_card(channel="C0AGENTS")
        assert "refunds-bot" in card.text
        request = await _request(client, "agents", "call-c")
        await client.cancel(request.ref, "changed plans")
        result = await running
    assert shop.refunded == [] and result.final_output == "Cancelled."
    assert _outputs(model)["call-c"] == (
        f"The approval request {request.ref} was cancelled; the call was not run.")


async def test_abandoning_the_wait_withdraws_the_request(askhuman: Any) -> None:
    shop = Shop()
    model = ScriptedModel([[_refund("A-17", 250, "call-w")]])
    async with askhuman.async_client() as client:
        paused = await Runner.run(shop.agent(model), "Refund", run_config=RUN_CONFIG)
        approving = asyncio.create_task(approve_interruptions(paused, client, "agents"))
        card = await askhuman.next_card(channel="C0AGENTS")
        approving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await approving
        request = await _request(client, "agents", "call-w")
        shown = await askhuman.thread(card)
    assert request.status == "cancelled" and shop.refunded == []
    assert request.result is not None and request.result.message is not None
    assert request.result.message.endswith("The agent stopped waiting for this approval.")
    assert shown["card"].startswith("Cancelled")


# ---------------------------------------------------------------- several calls


async def test_two_calls_in_one_turn_are_two_cards_answered_in_any_order(askhuman: Any) -> None:
    shop = Shop()
    model = ScriptedModel([[_refund("A-17", 250, "call-1"), _refund("B-2", 40, "call-2")],
                           [assistant_message("One refunded.")]])
    async with askhuman.async_client() as client:
        running = asyncio.create_task(run_with_approvals(
            shop.agent(model), "Refund both", client=client, route="agents",
            run_config=RUN_CONFIG))
        first = await askhuman.next_card(channel="C0AGENTS")
        second = await askhuman.next_card(channel="C0AGENTS")
        cards = {("*order*: A-17" in _shown(card)): card for card in (first, second)}
        await askhuman.click(cards[False], "Approve")      # B-2 first
        assert not running.done()                          # waits for every answer
        await askhuman.click(cards[True], "Reject", reason="Already refunded")
        result = await running
    assert shop.refunded == [("B-2", 40)] and result.final_output == "One refunded."
    told = _outputs(model)
    assert told["call-2"] == "Refunded 40 on B-2."
    assert told["call-1"].endswith(": Already refunded")


async def test_the_run_is_resumed_until_no_approval_waits(askhuman: Any) -> None:
    shop = Shop()
    model = ScriptedModel([[_refund("A-17", 250, "call-x")], [_refund("B-2", 40, "call-y")],
                           [assistant_message("Both refunded.")]])
    async with askhuman.async_client() as client:
        running = asyncio.create_task(run_with_approvals(
            shop.agent(model), "Refund A-17, then B-2", client=client, route="agents",
            run_config=RUN_CONFIG))
        await askhuman.click(await askhuman.next_card(channel="C0AGENTS"), "Approve")
        second = await askhuman.next_card(channel="C0AGENTS")
        assert "*order*: B-2" in _shown(second)
        await askhuman.click(second, "Approve")
        result = await running
    assert shop.refunded == [("A-17", 250), ("B-2", 40)]
    assert result.final_output == "Both refunded."
    model.assert_complete()


# ---------------------------------------------------------------- streamed, saved, refused


async def test_a_streamed_run_is_answered_the_same_way(askhuman: Any) -> None:
    shop = Shop()
    model = ScriptedModel([[_refund("A-17", 250, "call-s")], [assistant_message("Streamed.")]])
    agent = shop.agent(model)
    async with askhuman.async_client() as client:
        streamed = Runner.run_streamed(agent, "Refund", run_config=RUN_CONFIG)
        async for _ in streamed.stream_events():
            pass
        assert [item.call_id for item in streamed.interruptions] == ["call-s"]
        approving = asyncio.create_task(approve_interruptions(streamed, client, "agents"))
        await askhuman.click(await askhuman.next_card(channel="C0AGENTS"), "Approve")
        result = await Runner.run(agent, await approving, run_config=RUN_CONFIG)
    assert shop.refunded == [("A-17", 250)] and result.final_output == "Streamed."


async def test_a_saved_run_asked_again_with_its_run_key_makes_no_second_card(
        askhuman: Any) -> None:
    """A run saved while it waits (``to_string``) is answered from the saved copy; with
    the same ``run_key``, asking again about a call finds the same request."""
    shop = Shop()
    model = ScriptedModel([[_refund("A-17", 250, "call-k")], [assistant_message("Saved.")]])
    agent = shop.agent(model)
    async with askhuman.async_client() as client:
        paused = await Runner.run(agent, "Refund", run_config=RUN_CONFIG)
        saved = paused.to_state().to_string()
        first = asyncio.create_task(approve_interruptions(paused, client, "agents",
                                                          run_key="job-7"))
        card = await askhuman.next_card(channel="C0AGENTS")
        restored = await RunState.from_string(agent, saved)
        again = asyncio.create_task(approve_interruptions(restored, client, "agents",
                                                          run_key="job-7"))
        await askhuman.click(card, "Reject", reason="Refunds are frozen today")
        await asyncio.gather(first, again)
        new_cards = [c for c in await askhuman.cards("C0AGENTS")
                     if (c.channel, c.ts) not in askhuman.seen]
        result = await Runner.run(agent, restored, run_config=RUN_CONFIG)
    assert new_cards == [] and shop.refunded == [] and result.final_output == "Saved."
    assert _outputs(model)["call-k"].endswith(": Refunds are frozen today")


async def test_a_refused_route_raises_and_nothing_runs(askhuman: Any) -> None:
    shop = Shop()
    model = ScriptedModel([[_refund("A-17", 250, "call-f")], [assistant_message("Never.")]])
    async with askhuman.async_client() as client:
        with pytest.raises(Forbidden):
            await run_with_approvals(shop.agent(model), "Refund", client=client,
                                     route="not-mine", run_config=RUN_CONFIG)
    assert shop.refunded == [] and model.remaining_steps == 1


# ---------------------------------------------------------------- an edit is never run


async def test_an_edited_approval_is_refused_not_run_unedited() -> None:
    """askhuman never offers an edit here; if a verdict says edited anyway, the SDK
    would run the model's arguments, so the call is refused instead."""
    shop = Shop()
    model = ScriptedModel([[_refund("A-17", 250, "call-e")], [assistant_message("Refused.")]])
    agent = shop.agent(model)
    paused = await Runner.run(agent, "Refund", run_config=RUN_CONFIG)
    item = paused.interruptions[0]
    edited = HumanRequest.model_validate({
        "ref": "r-1", "kind": "approval", "status": "submitted", "route": "agents",
        "decision": {"approved": True, "reason": ""}, "updated_input": {"order": "A-17",
                                                                          "amount": 25}})
    state = paused.to_state()
    record_verdict(state, item, verdict_of(edited, json.loads(item.arguments or "{}")))
    await Runner.run(agent, state, run_config=RUN_CONFIG)
    assert shop.refunded == []
    assert "can only run the call as it was written" in _outputs(model)["call-e"]


def test_arguments_that_are_not_a_json_object_are_shown_whole() -> None:
    """Tools other than functions may carry plain text; the card shows it under
    ``input`` rather than a guess at its structure."""
    agent = Shop().agent(ScriptedModel())

    def item(arguments: str) -> ToolApprovalItem:
        return ToolApprovalItem(agent=agent, raw_item={
            "type": "function_call", "name": "refund", "call_id": "c", "arguments": arguments})

    assert call_arguments(item('{"order": "A-17"}')) == {"order": "A-17"}
    assert call_arguments(item("rm -rf /tmp/x")) == {"input": "rm -rf /tmp/x"}
    assert call_arguments(item("[1, 2]")) == {"input": [1, 2]}
