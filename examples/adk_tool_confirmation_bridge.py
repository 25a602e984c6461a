"""Google ADK tool confirmation answered by people in Slack or Feishu (through askhuman).

A tool wrapped with ``FunctionTool(..., require_confirmation=True)`` pauses and ADK
emits an ``adk_request_confirmation`` function call. The bridge sends that tool call
to askhuman as an approval card (``POST /api/v1/approvals``), waits for the decision,
and answers ADK with the ``FunctionResponse`` it expects (``{"confirmed": bool}``),
so the tool runs only if an approver clicked Approve.

Needs: ``pip install google-adk httpx`` (not a test dependency of askhuman), a model
for ADK (e.g. ``GOOGLE_API_KEY``), a running ``askhuman serve`` and an API key:
``ASKHUMAN_URL``, ``ASKHUMAN_API_KEY``. ADK's tool confirmation is experimental;
this follows its documented remote-response shape (ADK Python >= 1.14).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from askhuman_client import Client as AskHuman
from google.adk.agents import Agent
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import FunctionTool
from google.genai import types

CONFIRMATION = "adk_request_confirmation"


def reimburse(amount: int, employee: str) -> dict[str, Any]:
    """Reimburse an employee."""
    return {"status": "ok", "reimbursed": amount, "employee": employee}


agent = Agent(
    name="expenses", model=os.environ.get("ADK_MODEL", "gemini-2.5-flash"),
    instruction="You reimburse expenses with the reimburse tool.",
    tools=[FunctionTool(reimburse, require_confirmation=True)],
)


def confirmation_calls(event: Any) -> list[Any]:
    calls = event.get_function_calls() if hasattr(event, "get_function_calls") else []
    return [call for call in calls if call.name == CONFIRMATION]


def ask_people(askhuman: AskHuman, route: str, call: Any, session_id: str) -> types.Part:
    """Turn one confirmation request into an approval card and back into ADK's answer."""
    args = call.args or {}
    original = args.get("originalFunctionCall") or args.get("original_function_call") or {}
    hint = (args.get("toolConfirmation") or args.get("tool_confirmation") or {}).get("hint")
    decided = askhuman.approve(
        route, str(original.get("name", "tool")), dict(original.get("args") or {}),
        reason=hint, idempotency_key=f"adk:{session_id}:{call.id}")
    assert decided.decision is not None  # a resolved approval always has one
    approved, reason = decided.decision.approved, decided.decision.reason
    print(f"{original.get('name')}: {'approved' if approved else 'denied'} ({reason})")
    return types.Part(function_response=types.FunctionResponse(
        id=call.id, name=CONFIRMATION, response={"confirmed": approved}))


async def main() -> None:
    with AskHuman(os.environ.get("ASKHUMAN_URL", "http://127.0.0.1:3000"),
                  os.environ["ASKHUMAN_API_KEY"]) as askhuman:
        await confirm_with_people(askhuman)


async def confirm_with_people(askhuman: AskHuman) -> None:
    """Run the agent; each tool confirmation it asks for is answered by people."""
    route = os.environ.get("ASKHUMAN_ROUTE", "fin")
    sessions = InMemorySessionService()
    runner = Runner(agent=agent, app_name="expenses", session_service=sessions)
    session = await sessions.create_session(app_name="expenses", user_id="bridge")
    message = types.Content(role="user", parts=[types.Part(text="Reimburse Alice $250.")])
    while message is not None:
        answers: list[types.Part] = []
        async for event in runner.run_async(user_id="bridge", session_id=session.id,
                                            new_message=message):
            for call in confirmation_calls(event):
                # askhuman's client is synchronous: keep the event loop free meanwhile.
                answers.append(await asyncio.to_thread(ask_people, askhuman, route, call,
                                                       session.id))
            if event.is_final_response() and event.content and event.content.parts:
                print(event.content.parts[0].text)
        message = types.Content(role="user", parts=answers) if answers else None


if __name__ == "__main__":
    asyncio.run(main())
