"""askhuman for pydantic-ai agents that stop with ``DeferredToolRequests``.

pydantic-ai's "stop the world" human-in-the-loop: a tool with ``requires_approval=True``
(or one raising ``ApprovalRequired``) and an external tool (an ``ExternalToolset``, or
``CallDeferred``) end the run with ``DeferredToolRequests``; the next run, over the same
message history, gets the answers as ``DeferredToolResults``. The run may end in one
process and resume in another, so the answers must be plain data: that is all this
module produces.

- ``resolve_with_askhuman(requests, client=…, route=…)`` sends every approval (one card
  per call, bound to its tool name and exact arguments) and every ``ask_human`` call
  (a Dify ask_human v1 card) at once, waits for all of them, and returns the
  ``DeferredToolResults``.
- ``run_with_askhuman(agent, prompt, client=…, route=…)`` runs the agent and keeps
  answering and rerunning until its output is not deferred.
- ``ask_human_tool()`` / ``ask_human_toolset()`` give agents the external ``ask_human``
  tool whose parameters are Dify's ask_human v1 args.

Install with ``pip install "askhuman-client[pydantic-ai]"``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from pydantic_ai import (
    DeferredToolRequests,
    DeferredToolResults,
    ModelRetry,
    RunContext,
    ToolApproved,
    ToolDenied,
)
from pydantic_ai.agent import AbstractAgent, AgentRunResult
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import ExternalToolset

from askhuman_client.aio import AsyncClient
from askhuman_client.errors import ValidationFailed
from askhuman_client.verdicts import Verdict, approve_call, settle

__all__ = [
    "ASK_HUMAN", "EditNotes", "UnansweredCalls", "ask_human_tool", "ask_human_toolset",
    "resolve_with_askhuman", "run_with_askhuman",
]

ASK_HUMAN = "ask_human"
"""The external tool's name, as Dify and askhuman's own agents call it."""
GAVE_UP = "The agent stopped waiting for an answer."
"""Why an ask_human card is withdrawn when its caller stops waiting."""
META_KEY = "askhuman"
"""Key of askhuman's entry in ``DeferredToolResults.metadata[tool_call_id]``."""


class UnansweredCalls(ValueError):
    """External calls askhuman cannot answer (not ``ask_human``): the run cannot go on
    without their results, and guessing one would lie to the model."""


def ask_human_tool(*, name: str = ASK_HUMAN, description: str | None = None) -> ToolDefinition:
    """The external ``ask_human`` tool: Dify's ask_human v1 args as its parameters.

    The schema is the one askhuman's own agents show models (Dify's defaults:
    ``paragraph`` and ``select`` fields), shipped with this package, so an agent can be
    built without reaching the server. The server checks every call against its own
    guardrails; a refused call goes back to the model as a retry with Dify's error text.
    """
    spec = json.loads(resources.files("askhuman_client").joinpath("ask_human_v1.json")
                      .read_text(encoding="utf-8"))
    return ToolDefinition(name=name, description=description or spec["description"],
                          parameters_json_schema=spec["parameters"], strict=False,
                          kind="external")


def ask_human_toolset(*, name: str = ASK_HUMAN, description: str | None = None
                      ) -> ExternalToolset[Any]:
    """``ask_human_tool()`` in an ``ExternalToolset``, ready for ``Agent(toolsets=[…])``."""
    return ExternalToolset([ask_human_tool(name=name, description=description)])


@dataclass(frozen=True)
class _Asking:
    """Where and how one batch of deferred calls is asked."""

    client: AsyncClient
    route: str
    editable: Mapping[str, Sequence[str]] = field(default_factory=dict)
    schemas: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    ask_tool: str = ASK_HUMAN
    agent_name: str | None = None
    key_prefix: str | None = None

    def key(self, part: ToolCallPart) -> str | None:
        """An idempotency key only when the caller scoped call ids (``key_prefix``):
        models reuse ids across conversations, and a replayed key returns the old answer."""
        return f"{self.key_prefix}:{part.tool_call_id}" if self.key_prefix else None

    def context(self, part: ToolCallPart) -> dict[str, Any]:
        return {"framework": "pydantic-ai", "tool_call_id": part.tool_call_id}


def _reason(metadata: Mapping[str, Any]) -> str | None:
    """The agent's own words for the card, from ``ApprovalRequired(metadata={"reason": …})``."""
    reason = metadata.get("reason")
    return reason if isinstance(reason, str) and reason.strip() else None


def _edit_note(verdict: Verdict, asked: Mapping[str, Any]) -> str:
    changed = {k: v for k, v in verdict.args.items() if asked.get(k) != v}
    return (f"{verdict.message} The call ran with the edited arguments "
            f"{json.dumps(changed, ensure_ascii=False, default=str)}.")


async def _approval(asking: _Asking, part: ToolCallPart, metadata: Mapping[str, Any]
                    ) -> tuple[ToolApproved | ToolDenied, dict[str, Any]]:
    """One approval card for the call exactly as the model made it; its verdict as
    pydantic-ai's approval result, plus what the tool may read in ``tool_call_metadata``."""
    args = part.args_as_dict()
    names = [n for n in asking.editable.get(part.tool_name, ()) if n in args]
    verdict = await approve_call(
        asking.client, asking.route, part.tool_name, args, reason=_reason(metadata),
        editable=names or None,
        input_schema=asking.schemas.get(part.tool_name) if names else None,
        idempotency_key=asking.key(part), context=asking.context(part),
        agent_name=asking.agent_name)
    seen = {"ref": verdict.request.ref, "status": verdict.status,
            "decided_by": verdict.decided_by, "edited": verdict.edited}
    if not verdict.approved:
        return ToolDenied(verdict.message), seen
    if not verdict.edited:
        return ToolApproved(), seen
    return ToolApproved(override_args=verdict.args), {**seen, "note": _edit_note(verdict, args)}


async def _answer(asking: _Asking, part: ToolCallPart) -> Any:
    """The ``AskHumanToolResult`` dict of one ``ask_human`` card (the contract's timeout
    result when nobody answered), or a retry with the server's reason when it refused
    the model's arguments, as askhuman's own agents do."""
    try:
        args = part.args_as_dict()
    except ValueError as exc:
        return ModelRetry(f"{part.tool_name} arguments must be a JSON object: {exc}")
    try:
        request = await settle(asking.client, asking.client.create(
            asking.route, args, idempotency_key=asking.key(part),
            context=asking.context(part), agent_name=asking.agent_name), withdrawn=GAVE_UP)
    except ValidationFailed as exc:
        return ModelRetry(exc.detail or exc.title)
    assert request.result is not None  # a resolved request always carries its result
    return request.result.model_dump(mode="json")


def _unanswerable(requests: DeferredToolRequests, ask_tool: str) -> list[ToolCallPart]:
    return [part for part in requests.calls if part.tool_name != ask_tool]


async def resolve_with_askhuman(
    requests: DeferredToolRequests, *, client: AsyncClient, route: str,
    editable: Mapping[str, Sequence[str]] | None = None,
    schemas: Mapping[str, dict[str, Any]] | None = None, ask_tool: str = ASK_HUMAN,
    agent_name: str | None = None, key_prefix: str | None = None,
) -> DeferredToolResults:
    """Ask askhuman about every approval and ``ask_human`` call of ``requests`` at once.

    ``editable`` names, per tool, the arguments approvers may change ("Edit and
    approve"); ``schemas`` gives those tools' parameter JSON Schemas so the card's inputs
    are typed and checked. External calls to other tools are left out of the result for
    the caller to answer (``requests.remaining(results)`` lists them). Each approval's
    ``DeferredToolResults.metadata`` entry keeps the call's own metadata plus
    ``{"askhuman": {ref, status, decided_by, edited, note?}}``; ``answered_by`` names
    who decided. The results are plain data: they serialize with
    ``TypeAdapter(DeferredToolResults)`` for a run in another process.
    """
    asking = _Asking(client, route, editable or {}, schemas or {}, ask_tool, agent_name,
                     key_prefix)
    try:
        async with asyncio.TaskGroup() as group:
            approvals = {part.tool_call_id: group.create_task(
                _approval(asking, part, requests.metadata.get(part.tool_call_id) or {}))
                for part in requests.approvals}
            calls = {part.tool_call_id: group.create_task(_answer(asking, part))
                     for part in requests.calls if part.tool_name == ask_tool}
    except* Exception as group_error:  # the first failure, as the caller would expect it
        raise group_error.exceptions[0] from None
    results = DeferredToolResults(calls={cid: task.result() for cid, task in calls.items()})
    for cid, task in approvals.items():
        approval, seen = task.result()
        results.approvals[cid] = approval
        results.metadata[cid] = {**(requests.metadata.get(cid) or {}), META_KEY: seen}
        if seen["decided_by"]:
            results.answered_by[cid] = seen["decided_by"]
    return results


@dataclass
class EditNotes(AbstractCapability[Any]):
    """Tells the model when an approver edited its call.

    pydantic-ai shows the model only the tool's return for an approved call, so after
    ``ToolApproved(override_args=…)`` the model would believe its own arguments ran.
    This appends the note ``resolve_with_askhuman`` left in the call's metadata; pass it
    (``capabilities=[EditNotes()]``) to the run that takes the results.
    ``run_with_askhuman`` does. It also remembers the tools' parameter schemas it sees,
    for typed "Edit and approve" inputs."""

    schemas: dict[str, dict[str, Any]] = field(default_factory=dict)

    async def prepare_tools(self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]
                            ) -> list[ToolDefinition]:
        self.schemas.update({d.name: d.parameters_json_schema for d in tool_defs})
        return tool_defs

    async def after_tool_execute(self, ctx: RunContext[Any], *, call: ToolCallPart,
                                 tool_def: ToolDefinition, args: Any, result: Any) -> Any:
        seen = (ctx.tool_call_metadata or {}).get(META_KEY)
        note = seen.get("note") if isinstance(seen, dict) else None
        if not note:
            return result
        text = result if isinstance(result, str) else json.dumps(result, default=str)
        return f"{text}\n\n{note}"


async def run_with_askhuman(
    agent: AbstractAgent[Any, Any], prompt: str | None, *, client: AsyncClient, route: str,
    editable: Mapping[str, Sequence[str]] | None = None, ask_tool: str = ASK_HUMAN,
    key_prefix: str | None = None, max_rounds: int = 20, **run_kwargs: Any,
) -> AgentRunResult[Any]:
    """Run ``agent`` until its output is not ``DeferredToolRequests``, answering each
    stop through askhuman and rerunning with ``message_history`` and
    ``deferred_tool_results``. ``run_kwargs`` go to every ``agent.run`` (``deps``,
    ``message_history`` for the first run…); the agent's ``output_type`` must include
    ``DeferredToolRequests``. Raises ``UnansweredCalls`` before asking anything when a
    stop holds external calls other than ``ask_tool``."""
    notes = EditNotes()
    capabilities = [*(run_kwargs.pop("capabilities", None) or ()), notes]
    result = await agent.run(prompt, capabilities=capabilities, **run_kwargs)
    run_kwargs.pop("message_history", None)  # later runs continue this run's history
    run_kwargs.pop("deferred_tool_results", None)
    for _ in range(max_rounds):
        requests = result.output
        if not isinstance(requests, DeferredToolRequests):
            return result
        if others := _unanswerable(requests, ask_tool):
            raise UnansweredCalls(f"external calls askhuman cannot answer: "
                                  f"{sorted({p.tool_name for p in others})}")
        answers = await resolve_with_askhuman(
            requests, client=client, route=route, editable=editable, schemas=notes.schemas,
            ask_tool=ask_tool, agent_name=agent.name, key_prefix=key_prefix)
        result = await agent.run(None, message_history=result.all_messages(),
                                 deferred_tool_results=answers, capabilities=capabilities,
                                 **run_kwargs)
    raise RuntimeError(f"the agent was still waiting for people after {max_rounds} rounds")
