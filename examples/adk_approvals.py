"""Google ADK: a ``require_confirmation`` tool approved by people in Slack or Feishu.

``reimburse`` needs a confirmation; ``run_with_confirmations`` sends each paused call
to askhuman as an Approve / Reject card (the approver may edit ``amount``) and resumes
the run with the decision. ``AskHumanPlugin`` lets the model read a refusal's reason.

Needs ``pip install "askhuman-client[adk]"``, a running ``askhuman serve``,
``ASKHUMAN_API_KEY`` (``askhuman api-key create``), optionally ``ASKHUMAN_URL`` and
``ASKHUMAN_ROUTE``. Without ``ADK_MODEL`` a scripted stand-in model plays the LLM (no
key needed); set ``ADK_MODEL=gemini-2.5-flash`` and ``GOOGLE_API_KEY`` for a real one.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncGenerator
from typing import Annotated, Any

from askhuman_client import AsyncClient
from askhuman_client.adk import AskHumanPlugin, run_with_confirmations
from google.adk.agents import Agent
from google.adk.apps import App
from google.adk.events import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import FunctionTool
from google.genai import types
from pydantic import Field


def reimburse(amount: Annotated[int, Field(ge=1, le=500)], employee: str) -> dict[str, Any]:
    """Reimburse an employee's expense (at most $500)."""
    return {"reimbursed": amount, "employee": employee}


class StandIn(BaseLlm):
    """Calls reimburse once, then repeats what the tool answered: a model without a key."""

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False
                                     ) -> AsyncGenerator[LlmResponse, None]:
        results = [part.function_response.response for part in llm_request.contents[-1].parts
                   if part.function_response]
        part = (types.Part(text=f"The tool answered: {json.dumps(results)}") if results else
                types.Part(function_call=types.FunctionCall(
                    name="reimburse", args={"amount": 250, "employee": "alice"})))
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


async def run_agent(client: AsyncClient, route: str) -> list[str]:
    """Ask the agent for a reimbursement; what it says, with a line while it waits."""
    model = os.environ.get("ADK_MODEL") or StandIn(model="stand-in")
    agent = Agent(name="expenses", model=model, instruction="Reimburse expenses when asked.",
                  tools=[FunctionTool(reimburse, require_confirmation=True)])
    sessions = InMemorySessionService()
    runner = Runner(app=App(name="expenses", root_agent=agent, plugins=[AskHumanPlugin()]),
                    session_service=sessions)
    session = await sessions.create_session(app_name="expenses", user_id="u1")
    ask = types.Content(role="user", parts=[types.Part(text="Reimburse Alice $250.")])
    said: list[str] = []
    async for event in run_with_confirmations(runner, "u1", session.id, ask, client=client,
                                              route=route, editable=["amount"]):
        for line in lines_of(event):
            print(line)
            said.append(line)
    return said


def lines_of(event: Event) -> list[str]:
    """What a person watching would want to read of one event."""
    lines = []
    for part in (event.content.parts or []) if event.content else []:
        if part.text:
            lines.append(part.text)
        elif part.function_call and part.function_call.name == "adk_request_confirmation":
            lines.append("Waiting for a person in Slack / Feishu…")
    return lines


async def main() -> None:
    async with AsyncClient(os.environ.get("ASKHUMAN_URL", "http://127.0.0.1:3000"),
                           os.environ["ASKHUMAN_API_KEY"]) as client:
        await run_agent(client, os.environ.get("ASKHUMAN_ROUTE", "ops"))


if __name__ == "__main__":
    asyncio.run(main())
