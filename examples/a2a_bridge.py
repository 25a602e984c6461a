"""Talk to an A2A agent and let people in Slack or Feishu answer its questions
(``pip install "askhuman-client[a2a]"``; see docs/integrations/a2a.md).

Whenever the agent's task enters ``input-required``, its question becomes a card on
the route; the answer goes back to the agent as the next message on that task.

    ASKHUMAN_API_KEY=ahk_… python examples/a2a_bridge.py http://127.0.0.1:9999 "Deploy v1.2.3"

The agent is any A2A server (a2a-sdk or another SDK); the first argument is its base
URL, where it serves ``/.well-known/agent-card.json``.
"""

from __future__ import annotations

import asyncio
import os
import sys

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.helpers import get_message_text
from a2a.types.a2a_pb2 import Task, TaskState
from askhuman_client import AsyncClient
from askhuman_client.a2a import A2ABridge


async def main(agent_url: str, prompt: str) -> None:
    route = os.environ.get("ASKHUMAN_ROUTE", "ops")
    async with (
        AsyncClient(os.environ.get("ASKHUMAN_URL", "http://127.0.0.1:3000"),
                    os.environ["ASKHUMAN_API_KEY"]) as askhuman,
        httpx.AsyncClient(timeout=120) as http,
    ):
        agent = await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(agent_url)
        try:
            bridge = A2ABridge(agent=agent, askhuman=askhuman, route=route, agent_name="a2a")
            outcome = await bridge.send(prompt)
        finally:
            await agent.close()
    if isinstance(outcome, Task):
        print(TaskState.Name(outcome.status.state), get_message_text(outcome.status.message))
    else:
        print(get_message_text(outcome))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "Hello"))
