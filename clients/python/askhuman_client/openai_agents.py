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
import json
import re
from dataclasses import dataclass
from typing import Any

from agents import Agent, Runner, RunResult, RunResultStreaming, RunState
from agents.items import ToolApprovalItem

from askhuman_client.aio import AsyncClient
from askhuman_client.verdicts import Verdict, approve_call

__all__ = ["approve_interruptions", "call_arguments", "record_verdict", "run_with_approvals"]

_EDITED = ("A reviewer changed the arguments before approving, but this agent can only run "
           "the call as it was written; the call was not run.")


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


@dataclass(frozen=True)
class _Asking:
    """Where and how each call is asked about: the same for every call of a run."""

    client: AsyncClient
    route: str
    request_context: dict[str, Any] | None
    agent_name: str | None
    run_key: str | None

    def key(self, item: ToolApprovalItem) -> str | None:
        """One idempotency key per call of a named run, so asking again (after a crash,
        from a saved state) finds the same request rather than making a second card."""
        return f"{self.run_key}:{item.call_id}" if self.run_key and item.call_id else None

    async def ask(self, item: ToolApprovalItem) -> Verdict:
        """One approval request for one call (withdrawn if the caller stops waiting)."""
        return await approve_call(
            self.client, self.route, item.qualified_name or item.name or "tool",
            call_arguments(item),
            context={**(self.request_context or {}), "openai_agents_call_id": item.call_id},
            agent_name=self.agent_name or _agent_name(item), idempotency_key=self.key(item))

    async def verdicts(self, items: list[ToolApprovalItem]) -> list[Verdict]:
        """Every call asked at once; the first failure (a refused route, a lost server)
        is raised as itself, and the other requests are withdrawn."""
        try:
            async with asyncio.TaskGroup() as group:
                asks = [group.create_task(self.ask(item)) for item in items]
        except BaseExceptionGroup as failed:
            raise failed.exceptions[0] from failed
        return [ask.result() for ask in asks]


async def approve_interruptions(run: RunResult | RunResultStreaming | RunState[Any],
                                client: AsyncClient, route: str, *,
                                request_context: dict[str, Any] | None = None,
                                agent_name: str | None = None,
                                run_key: str | None = None) -> RunState[Any]:
    """Ask askhuman about every pending approval of ``run`` at once, record the answers,
    and return the state to pass back to ``Runner.run(agent, state)``.

    The requests go out together, so people may answer in any order; the run resumes
    only when every one is resolved (decided, timed out or cancelled).
    """
    state = run if isinstance(run, RunState) else run.to_state()
    items = list(state.get_interruptions())
    asking = _Asking(client, route, request_context, agent_name, run_key)
    for item, verdict in zip(items, await asking.verdicts(items), strict=True):
        record_verdict(state, item, verdict)
    return state


async def run_with_approvals(agent: Agent[Any], input: str | list[Any], *, client: AsyncClient,
                             route: str,
                             request_context: dict[str, Any] | None = None,
                             agent_name: str | None = None, run_key: str | None = None,
                             **run_kwargs: Any) -> RunResult:
    """``Runner.run`` that lets people answer every approval, until the run finishes.

    ``run_kwargs`` go to each ``Runner.run`` (``run_config``, ``max_turns``, the run's
    ``context``…); ``request_context`` is askhuman's, kept with each request.
    """
    result = await Runner.run(agent, input, **run_kwargs)
    while result.interruptions:
        state = await approve_interruptions(result, client, route,
                                            request_context=request_context,
                                            agent_name=agent_name, run_key=run_key)
        result = await Runner.run(agent, state, **run_kwargs)
    return result
