"""A pydantic-ai agent that pauses in one process and is answered by people from another.

    pip install -e "clients/python[pydantic-ai]"
    export ASKHUMAN_API_KEY=ahk_…            # askhuman api-key create …
    python examples/pydantic_ai_remote.py start "scale api to 10"   # runs, pauses
    python examples/pydantic_ai_remote.py answer                    # cards in Slack/Feishu
    python examples/pydantic_ai_remote.py resume                    # runs the approved call

``start`` and ``resume`` are the agent's process; ``answer`` needs only the askhuman key
and may run anywhere. They share JSON files in ``ASKHUMAN_STATE`` (default
``./askhuman-run``). In one process, ``run_with_askhuman(agent, prompt, client=…,
route=…)`` does all three. The model is a scripted ``FunctionModel`` (no key needed);
set ``PYDANTIC_AI_MODEL=openai:gpt-4.1`` for a real one (with ``pydantic-ai-slim[openai]``
installed and ``OPENAI_API_KEY`` set).
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path
from typing import Any

from askhuman_client import AsyncClient
from askhuman_client.pydantic_ai import EditNotes, ask_human_toolset, resolve_with_askhuman
from pydantic import TypeAdapter
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

STATE = Path(os.environ.get("ASKHUMAN_STATE", "askhuman-run"))
REQUESTS = TypeAdapter(DeferredToolRequests)
RESULTS = TypeAdapter(DeferredToolResults)


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Stands in for a real model: "scale X to N" → one ``scale`` call; then it reports
    what the tool (or the approver) said."""
    returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if returns:
        return ModelResponse(parts=[TextPart(" ".join(str(p.content) for p in returns))])
    prompt = str(messages[0].parts[-1].content)
    found = re.search(r"scale (\w+) to (\d+)", prompt)
    service, replicas = (found.group(1), int(found.group(2))) if found else ("api", 2)
    return ModelResponse(parts=[ToolCallPart("scale", {"service": service,
                                                       "replicas": replicas})])


agent: Agent[None, Any] = Agent(
    os.environ.get("PYDANTIC_AI_MODEL") or FunctionModel(scripted), name="ops-agent",
    output_type=[str, DeferredToolRequests], toolsets=[ask_human_toolset()],
    instructions="Scale services when asked; ask_human when you need a decision.")


@agent.tool_plain(requires_approval=True)
def scale(service: str, replicas: int) -> str:
    """Scale a service to a number of replicas."""
    return f"scaled {service} to {replicas}"


def save(result: Any) -> None:
    """Keep the run's history; when it paused, the requests to answer too."""
    STATE.mkdir(exist_ok=True)
    (STATE / "history.json").write_bytes(result.all_messages_json())
    if isinstance(result.output, DeferredToolRequests):
        (STATE / "requests.json").write_bytes(REQUESTS.dump_json(result.output))
        print(f"paused: {len(result.output.approvals)} approval(s), "
              f"{len(result.output.calls)} question(s); run `answer`")
    else:
        print(result.output)


async def start(prompt: str) -> None:
    save(await agent.run(prompt))


async def answer() -> None:
    requests = REQUESTS.validate_json((STATE / "requests.json").read_bytes())
    async with AsyncClient(os.environ.get("ASKHUMAN_URL", "http://127.0.0.1:3000"),
                           os.environ["ASKHUMAN_API_KEY"]) as client:
        results = await resolve_with_askhuman(
            requests, client=client, route=os.environ.get("ASKHUMAN_ROUTE", "ops"),
            editable={"scale": ["replicas"]}, key_prefix="pydantic-ai-example")
    (STATE / "answers.json").write_bytes(RESULTS.dump_json(results))
    print("answered:", sorted(results.approvals) + sorted(results.calls))


async def resume() -> None:
    history = ModelMessagesTypeAdapter.validate_json((STATE / "history.json").read_bytes())
    answers = RESULTS.validate_json((STATE / "answers.json").read_bytes())
    save(await agent.run(None, message_history=history, deferred_tool_results=answers,
                         capabilities=[EditNotes()]))  # EditNotes tells the model about edits


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else "start"
    if command == "start":
        asyncio.run(start(" ".join(sys.argv[2:]) or "scale api to 10"))
    elif command in ("answer", "resume"):
        asyncio.run(answer() if command == "answer" else resume())
    else:
        sys.exit(f"usage: {sys.argv[0]} start PROMPT | answer | resume")
