"""Google ADK tool confirmations answered by people in Slack or Feishu, through askhuman.

ADK pauses a ``FunctionTool(func, require_confirmation=...)`` call and emits an
``adk_request_confirmation`` function call; the run goes on once the app answers it
with a ``FunctionResponse`` holding a ``ToolConfirmation``. Here each paused call
becomes one askhuman approval, bound to that call's tool name and arguments, and the
decision becomes the ``ToolConfirmation``.

ADK itself answers a refused call with a fixed "This tool call is rejected." and runs
an approved one with the model's arguments. ``AskHumanPlugin`` (``_adk_plugin``;
install it on the app) reads what askhuman puts in the confirmation's ``payload`` so
the model gets the approver's reason and the tool runs with the arguments they edited.

Importing this module imports ``google.adk`` and ``google.genai`` (about a second,
+25 MB): only those who use it pay that, never ``import askhuman_client``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from google.adk.events import Event
from google.adk.runners import Runner
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from askhuman_client._adk_plugin import CONTEXT_KEY, PAYLOAD_KEY, AskHumanPlugin, call_hash
from askhuman_client.aio import AsyncClient
from askhuman_client.verdicts import Verdict, approve_call

__all__ = [
    "CONFIRMATION_CALL", "AskHumanPlugin", "ConfirmationRequest", "ask_confirmation",
    "confirmation_part", "confirmation_requests", "confirmation_response",
    "run_with_confirmations", "tool_schemas",
]

CONFIRMATION_CALL = "adk_request_confirmation"
# The hint ADK writes when the tool itself gave none: it addresses the app's
# developer, not the approver, so it is not shown as the reason on the card.
_DEFAULT_HINT_START = "Please approve or reject the tool call "

Editable = Sequence[str] | Mapping[str, Sequence[str]]


@dataclass(frozen=True)
class ConfirmationRequest:
    """One paused tool call: the confirmation call ADK waits on and the call it holds."""

    confirmation_id: str
    call_id: str
    tool_name: str
    args: dict[str, Any]
    hint: str
    agent: str | None = None

    @property
    def reason(self) -> str | None:
        """The hint for the card, unless it is ADK's note to developers."""
        if not self.hint or self.hint.startswith(_DEFAULT_HINT_START):
            return None
        return self.hint


def confirmation_requests(event: Event) -> list[ConfirmationRequest]:
    """The confirmation requests an event carries (usually none)."""
    return [_request_of(call, event.author) for call in event.get_function_calls()
            if call.name == CONFIRMATION_CALL and call.id]


def _request_of(call: types.FunctionCall, agent: str | None) -> ConfirmationRequest:
    args = call.args or {}
    original = args.get("originalFunctionCall") or {}
    confirmation = args.get("toolConfirmation") or {}
    return ConfirmationRequest(
        confirmation_id=str(call.id), call_id=str(original.get("id", "")),
        tool_name=str(original.get("name", "")), args=dict(original.get("args") or {}),
        hint=str(confirmation.get("hint") or ""), agent=agent)


def _idempotency_key(call_id: str | None) -> str:
    """One askhuman request per paused call: ADK's call ids are unique (``adk-`` +
    a UUID)."""
    return f"adk:{call_id}"


def _editable_for(editable: Editable | None, request: ConfirmationRequest) -> list[str] | None:
    """A list applies to every tool, a mapping names them per tool; only arguments the
    call has can be edited (askhuman refuses others)."""
    names = editable.get(request.tool_name, ()) if isinstance(editable, Mapping) else editable
    names = [names] if isinstance(names, str) else names  # "amount" is one name, not five
    return [name for name in names or () if name in request.args] or None


async def ask_confirmation(request: ConfirmationRequest, *, client: AsyncClient, route: str,
                           editable: Editable | None = None,
                           input_schema: dict[str, Any] | None = None,
                           agent_name: str | None = None) -> Verdict:
    """Ask askhuman about one paused call and wait for the decision.

    The idempotency key is the paused call's id, so asking again with the same
    arguments (a retry after a crash) finds the same card instead of posting a second
    one. ``input_schema`` (the tool's) lets askhuman check an edit against the tool's
    own types and bounds. ``agent_name`` defaults to the agent that paused."""
    names = _editable_for(editable, request)
    return await approve_call(
        client, route, request.tool_name, request.args, reason=request.reason,
        editable=names, input_schema=input_schema if names else None,
        idempotency_key=_idempotency_key(request.call_id),
        context={CONTEXT_KEY: call_hash(request.call_id, request.tool_name, request.args)},
        agent_name=agent_name or request.agent)


def confirmation_part(request: ConfirmationRequest, verdict: Verdict) -> types.Part:
    """The FunctionResponse ADK expects, with askhuman's answer in the payload."""
    answer = {"ref": verdict.request.ref, "message": verdict.message, "status": verdict.status,
              "decided_by": verdict.decided_by,
              "args": verdict.args if verdict.edited else None}
    confirmation = ToolConfirmation(confirmed=verdict.approved, hint=request.hint,
                                    payload={PAYLOAD_KEY: answer})
    return types.Part(function_response=types.FunctionResponse(
        id=request.confirmation_id, name=CONFIRMATION_CALL,
        response=confirmation.model_dump(by_alias=True, exclude_none=True)))


async def confirmation_response(event: Event, *, client: AsyncClient, route: str,
                                editable: Editable | None = None,
                                input_schemas: Mapping[str, dict[str, Any]] | None = None,
                                agent_name: str | None = None) -> types.Content | None:
    """Answer every confirmation request in one event: the message that resumes the
    run (``None`` if the event asks nothing). The calls are asked at once, so
    parallel calls post their cards together. ``input_schemas``: by tool name, as
    :func:`tool_schemas` gives them."""
    requests = confirmation_requests(event)
    if not requests:
        return None
    schemas = input_schemas or {}
    verdicts = await asyncio.gather(*(
        ask_confirmation(request, client=client, route=route, editable=editable,
                         input_schema=schemas.get(request.tool_name),
                         agent_name=agent_name) for request in requests))
    pairs = zip(requests, verdicts, strict=True)
    return types.Content(role="user", parts=[confirmation_part(*pair) for pair in pairs])


async def run_with_confirmations(runner: Runner, user_id: str, session_id: str,
                                 new_message: types.Content, *, client: AsyncClient,
                                 route: str, editable: Editable | None = None,
                                 **run_kwargs: Any) -> AsyncIterator[Event]:
    """``runner.run_async`` that has askhuman answer the run's tool confirmations.

    Yields every event of the run, its resumptions included. The confirmation
    requests are asked once the pass that raised them has ended (ADK has stored it by
    then), and the answers are the next message. Needs ``AskHumanPlugin`` on the
    runner, or the model would never see a refusal's reason and edited arguments
    would be dropped."""
    if not any(isinstance(plugin, AskHumanPlugin) for plugin in runner.plugin_manager.plugins):
        raise ValueError("run_with_confirmations needs AskHumanPlugin on the runner: "
                         "App(..., plugins=[AskHumanPlugin()])")
    schemas = tool_schemas(runner.agent) if editable else {}
    message: types.Content | None = new_message
    while message is not None:
        asking: list[Event] = []
        async for event in runner.run_async(user_id=user_id, session_id=session_id,
                                            new_message=message, **run_kwargs):
            yield event
            if confirmation_requests(event):
                asking.append(event)
        message = await _answers(asking, client=client, route=route, editable=editable,
                                 input_schemas=schemas)


async def _answers(events: list[Event], **ask: Any) -> types.Content | None:
    """One message answering every confirmation the pass raised (asked at once)."""
    responses = await asyncio.gather(*(confirmation_response(event, **ask) for event in events))
    parts = [part for response in responses if response for part in response.parts or []]
    return types.Content(role="user", parts=parts) if parts else None


def tool_schemas(agent: Any) -> dict[str, dict[str, Any]]:
    """The JSON Schema of each tool's arguments, by tool name, for an agent and its
    sub-agents: what ADK tells the model the arguments are. Tools whose declaration
    has no JSON Schema, and toolsets (they list their tools only in a run), are left
    out; askhuman then keeps each edited argument the type of its value."""
    schemas: dict[str, dict[str, Any]] = {}
    for tool in getattr(agent, "tools", None) or []:
        if callable(tool) and not isinstance(tool, BaseTool):
            tool = FunctionTool(tool)  # how ADK itself wraps a plain function
        declaration = tool._get_declaration() if isinstance(tool, BaseTool) else None
        if declaration is not None and isinstance(declaration.parameters_json_schema, dict):
            schemas[tool.name] = declaration.parameters_json_schema
    for sub_agent in getattr(agent, "sub_agents", None) or []:
        schemas = tool_schemas(sub_agent) | schemas
    return schemas
