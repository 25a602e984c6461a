"""Answer the OpenAI Agents SDK's tool approvals from Slack or Feishu through askhuman.

A tool made with ``function_tool(needs_approval=...)`` pauses the run: ``Runner.run``
returns with ``result.interruptions``, one ``ToolApprovalItem`` per call that waits.
This module asks askhuman once per call, bound to that call's tool name and exact
arguments, and records each answer on the run's state with ``state.approve`` or
``state.reject(rejection_message=...)``: the SDK sends that message to the model as the
call's output, so a reviewer's reason (or the truth that nobody answered) is what the
model reads next.

The SDK runs an approved call with the arguments the model wrote (its approval is
bound to them), so there is no "edit and approve" here: approvals are requested
without editable arguments.

Install with ``pip install "askhuman-client[openai-agents]"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from typing import Any

import httpx
from agents import Agent, Runner, RunResult, RunResultStreaming, RunState
from agents.items import ToolApprovalItem

from askhuman_client.aio import AsyncClient
from askhuman_client.errors import AskHumanError
from askhuman_client.verdicts import Verdict, verdict_of

__all__ = ["approve_interruptions", "call_arguments", "record_verdict", "run_with_approvals"]

_EDITED = ("A reviewer changed the arguments before approving, but this agent can only run "
           "the call as it was written; the call was not run.")
_WITHDRAWN = "The agent stopped waiting for this approval."


def call_arguments(item: ToolApprovalItem) -> dict[str, Any]:
    """The call's arguments as the approver should see them.

    Function calls carry a JSON object; other tools (shell, MCP, custom) may carry
    plain text, which is shown whole under ``input`` rather than guessed at.
    """
    raw = item.arguments
    if raw is None:
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {"input": raw}
    return parsed if isinstance(parsed, dict) else {"input": parsed}


def _agent_name(item: ToolApprovalItem) -> str | None:
    """The SDK agent's name in the form askhuman accepts (it is shown on the card)."""
    name = re.sub(r"[^A-Za-z0-9_.\-]+", "-", str(getattr(item.agent, "name", "") or "")).strip("-")
    return name[:64] or None


def record_verdict(state: RunState[Any], item: ToolApprovalItem, verdict: Verdict) -> None:
    """Approve or reject ``item`` on ``state``; every refusal carries its words for the model.

    An edited approval is refused: the SDK would run the model's arguments, not the
    edited ones, and running a call nobody approved is worse than not running it.
    """
    if verdict.approved and not verdict.edited:
        state.approve(item)
        return
    state.reject(item, rejection_message=_EDITED if verdict.approved else verdict.message)


async def _ask(client: AsyncClient, route: str, item: ToolApprovalItem,
               request_context: dict[str, Any] | None, agent_name: str | None) -> Verdict:
    """One approval request for one call; withdrawn if the caller stops waiting, so no
    card keeps asking for a decision nobody will act on."""
    args = call_arguments(item)
    created = await client.request_approval(
        route, item.qualified_name or item.name or "tool", args,
        context={**(request_context or {}), "openai_agents_call_id": item.call_id},
        agent_name=agent_name or _agent_name(item))
    try:
        return verdict_of(await client.wait(created.ref), args)
    except BaseException:
        with contextlib.suppress(AskHumanError, httpx.HTTPError):
            await asyncio.shield(client.cancel(created.ref, _WITHDRAWN))
        raise


async def approve_interruptions(run: RunResult | RunResultStreaming | RunState[Any],
                                client: AsyncClient, route: str, *,
                                request_context: dict[str, Any] | None = None,
                                agent_name: str | None = None) -> RunState[Any]:
    """Ask askhuman about every pending approval of ``run`` at once, record the answers,
    and return the state to pass back to ``Runner.run(agent, state)``.

    The requests go out together, so people may answer in any order; the run resumes
    only when every one is resolved (decided, timed out or cancelled).
    """
    state = run if isinstance(run, RunState) else run.to_state()
    items = list(state.get_interruptions())
    async with asyncio.TaskGroup() as group:
        asks = [group.create_task(_ask(client, route, item, request_context, agent_name))
                for item in items]
    for item, ask in zip(items, asks, strict=True):
        record_verdict(state, item, ask.result())
    return state


async def run_with_approvals(agent: Agent[Any], input: Any, *, client: AsyncClient, route: str,
                             request_context: dict[str, Any] | None = None,
                             agent_name: str | None = None, **run_kwargs: Any) -> RunResult:
    """``Runner.run`` that lets people answer every approval, until the run finishes.

    ``run_kwargs`` go to each ``Runner.run`` (``run_config``, ``max_turns``, the run's
    ``context``…); ``request_context`` is askhuman's, kept with each request.
    """
    result = await Runner.run(agent, input, **run_kwargs)
    while result.interruptions:
        state = await approve_interruptions(result, client, route,
                                            request_context=request_context,
                                            agent_name=agent_name)
        result = await Runner.run(agent, state, **run_kwargs)
    return result
