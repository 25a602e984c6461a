"""An OpenAI Agents SDK agent whose refunds people approve in Slack or Feishu.

    pip install "askhuman-client[openai-agents]"  # a checkout: -e "clients/python[openai-agents]"
    ASKHUMAN_API_KEY=ahk_… ASKHUMAN_ROUTE=ops python examples/openai_agents_approvals.py

Without ``OPENAI_API_KEY`` the agent's model is the SDK's ``ScriptedModel`` (it asks
for two refunds, then answers), so the example runs without a key; approve one card and
reject the other with a note to see the agent's answer. With ``OPENAI_API_KEY`` set it
uses a real model (``OPENAI_MODEL``, default ``gpt-4.1-mini``). See
docs/integrations/openai-agents.md.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from agents import Agent, Model, RunConfig, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from askhuman_client import AsyncClient
from askhuman_client.openai_agents import run_with_approvals


@function_tool(needs_approval=True)
def refund(order: str, amount: int) -> str:
    """Refund part of an order (pretend: prints instead of paying)."""
    print(f"refunding {amount} on {order}")
    return f"Refunded {amount} on {order}."


def offline_model() -> Model:
    """Two refunds in one turn, then a sentence; stands in for a real model."""
    return ScriptedModel([
        [function_call("refund", {"order": "A-17", "amount": 250}, call_id="call-1"),
         function_call("refund", {"order": "B-2", "amount": 9000}, call_id="call-2")],
        [assistant_message("I asked for both refunds; see the tool results for what ran.")],
    ])


async def main() -> None:
    model: str | Model = (os.environ.get("OPENAI_MODEL", "gpt-4.1-mini")
                          if os.environ.get("OPENAI_API_KEY") else offline_model())
    agent: Agent[Any] = Agent(name="Refund agent", model=model, tools=[refund],
                              instructions="Refund what the user asks for, one call per order.")
    async with AsyncClient(os.environ.get("ASKHUMAN_URL", "http://127.0.0.1:3000"),
                           os.environ["ASKHUMAN_API_KEY"]) as client:
        result = await run_with_approvals(
            agent, "Refund 250 on order A-17 and 9000 on order B-2.", client=client,
            route=os.environ.get("ASKHUMAN_ROUTE", "ops"),
            run_config=RunConfig(tracing_disabled=not os.environ.get("OPENAI_API_KEY")))
    for item in result.new_items:   # what each call returned, or why it did not run
        if item.type == "tool_call_output_item":
            print("tool:", item.output)
    print("agent:", result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
