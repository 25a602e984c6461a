"""The embedded runtime: a pydantic-ai ``Agent`` with ask_human and the admin's tools.

The run uses the "stop the world" style: ``DeferredToolRequests`` is an allowed
output type, so asking a human (an ask_human call, or tool calls that need approval)
ends the run and the full message history becomes the snapshot. Resuming is a new
run over that history with every answer at once in one ``DeferredToolResults``:
the ask_human result in ``calls``, each approval as ``ToolApproved`` / ``ToolDenied``
in ``approvals``. Before anything runs, each pending tool call is re-hashed and must
match the hash stored when approval was asked (``ToolBindingError`` otherwise).
When the one open call is the ask_human call, its answer is appended as that call's
tool return instead and the run continues from there: the same messages, one graph
step less (``_close_only_call``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import JsonValue, ValidationError
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.exceptions import UnexpectedModelBehavior, UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import Model

from bot.agents.base import AgentRuntimeError, Outcome, ResumeMismatchError, ToolBindingError
from bot.agents.models import resolve_model
from bot.agents.snapshot import dump_snapshot, load_messages, prepare_loader
from bot.agents.spec import AgentSpec
from bot.askhuman.schema import AskHumanToolResult
from bot.askhuman.tool import (
    build_ask_human_tool,
    build_deferred_tool_call_payload,
    build_prompt_hint,
)
from bot.tools.approval import ApprovalTicket, ToolApprovalRequest, approval_result
from bot.tools.binding import binding_hash
from bot.tools.edits import EDIT_NOTE
from bot.tools.observer import ToolDeps, ToolObserver

PENDING_APPROVALS = "pending_approvals"
"""Snapshot key: the tool_call_ids waiting for approval (next to ``pending_tool_call_id``)."""


class LocalRuntime:
    """Runs one ``AgentSpec`` in-process."""

    def __init__(self, spec: AgentSpec, model: Model | None = None) -> None:
        from bot.tools.build import build_agent_tools
        from bot.tools.python import ToolConfigError

        self.name = spec.name
        self.spec = spec
        tool = build_ask_human_tool(spec.ask_human)
        reserved = {tool.name: f"the {tool.name} tool"} if tool else {}
        try:
            self.tools = build_agent_tools(spec.name, spec.tools, reserved)
        except ToolConfigError as exc:
            raise AgentRuntimeError(f"agent {spec.name!r}: {exc.key}: {exc}") from None
        instructions = [
            text for text in (spec.instructions, build_prompt_hint(spec.ask_human)) if text
        ]
        deferrable = tool is not None or bool(spec.tools)
        output_type: Any = [str, DeferredToolRequests] if deferrable else str
        self._agent: Agent[ToolDeps, Any] = Agent(
            model or resolve_model(spec.model, spec.ask_human.tool_name),
            output_type=output_type,
            instructions="\n\n".join(instructions) or None,
            tools=[tool] if tool else [],
            toolsets=self.tools.toolsets,
            deps_type=ToolDeps,
            name=spec.name,
        )
        prepare_loader()

    async def run(self, prompt: str, *, observer: ToolObserver | None = None) -> Outcome:
        if not prompt.strip():
            raise AgentRuntimeError("run.user_prompts must not be empty")
        return await self._run(prompt, history=None, results=None, observer=observer)

    async def resume(
        self,
        snapshot: dict[str, JsonValue],
        results: dict[str, AskHumanToolResult],
        *,
        tickets: Mapping[str, ApprovalTicket] | None = None,
        observer: ToolObserver | None = None,
    ) -> Outcome:
        """Continue with every pending call answered; ``tickets`` carry the approved hashes."""
        history = load_messages(snapshot, self.name)
        pending = snapshot.get("pending_tool_call_id")
        approvals = [str(c) for c in _as_list(snapshot.get(PENDING_APPROVALS))]
        expected = ({str(pending)} if pending is not None else set()) | set(approvals)
        if not expected:
            raise ResumeMismatchError(
                "this snapshot has no pending ask_human call, so there is nothing to resume"
            )
        if set(results) != expected:
            wanted = pending if not approvals else sorted(expected)
            raise ResumeMismatchError(
                f"resume results must answer tool_call_id {wanted!r}, got {sorted(results)!r}"
            )
        if not approvals and pending is not None:
            closed = _close_only_call(history, str(pending), results[str(pending)])
            if closed is not None:
                return await self._run(None, history=closed, results=None, observer=observer)
        tickets = tickets or {}
        calls = self._check_bindings(history, approvals, tickets)
        edited = {c: self._edited(calls[c], tickets[c]) for c in approvals}
        deferred = DeferredToolResults(
            calls={str(pending): results[str(pending)].model_dump(mode="json")}
            if pending is not None else {},
            approvals={c: approval_result(results[c], tickets[c].waited_seconds,
                                          edited[c][0]) for c in approvals},
            metadata={c: edited[c][1] for c in approvals},
        )
        return await self._run(None, history=history, results=deferred, observer=observer)

    def _check_bindings(
        self, history: list[ModelMessage], approvals: list[str],
        tickets: Mapping[str, ApprovalTicket],
    ) -> dict[str, ToolCallPart]:
        """Every pending approval must still be exactly the call that was approved (the
        call as the model wrote it, before any approver's edit)."""
        calls = _pending_calls(history)
        for call_id in approvals:
            ticket = tickets.get(call_id)
            if ticket is None:
                raise ResumeMismatchError(f"no stored approval for tool call {call_id!r}")
            part = calls.get(call_id)
            actual = self._binding(part) if part is not None else ""
            if actual != ticket.binding:
                tool = part.tool_name if part is not None else "(missing call)"
                raise ToolBindingError(call_id, tool, ticket.binding, actual)
        return calls

    def _edited(
        self, part: ToolCallPart, ticket: ApprovalTicket
    ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """``(override_args, metadata)`` of one approval: with an edit, the call's
        arguments with the edited values, hashed again for the ``tool_started`` audit,
        and the note the model reads; else ``(None, {"binding": …})``."""
        if not ticket.edited:
            return None, {"binding": ticket.binding}
        args = {**part.args_as_dict(), **ticket.edited}
        binding = binding_hash(part.tool_name, args, self.tools.fixed_for(part.tool_name))
        return args, {"binding": binding, EDIT_NOTE: ticket.edit_note or ""}

    def _binding(self, part: ToolCallPart) -> str:
        try:
            args = part.args_as_dict()
        except ValueError:
            return ""
        return binding_hash(part.tool_name, args, self.tools.fixed_for(part.tool_name))

    async def aclose(self) -> None:
        """Close the agent's MCP servers (process shutdown)."""
        await self.tools.aclose()

    async def _run(
        self, prompt: str | None, history: Any, results: DeferredToolResults | None,
        observer: ToolObserver | None = None,
    ) -> Outcome:
        try:
            result = await self._agent.run(
                prompt, message_history=history, deferred_tool_results=results,
                deps=ToolDeps(observer),
            )
        except (UserError, UnexpectedModelBehavior, ValidationError) as exc:
            raise AgentRuntimeError(str(exc)) from exc
        messages = result.all_messages()
        if isinstance(result.output, DeferredToolRequests):
            return self._deferred(result.output, messages)
        return Outcome.finished(result.output, dump_snapshot(self.name, messages, None))

    def _deferred(self, requests: DeferredToolRequests, messages: list[ModelMessage]) -> Outcome:
        """Split the run's deferred calls: one ask_human payload, one request per approval."""
        call = None
        if requests.calls or not requests.approvals:
            try:
                call = build_deferred_tool_call_payload(
                    DeferredToolRequests(calls=requests.calls), self.spec.ask_human)
            except (ValueError, ValidationError) as exc:
                raise AgentRuntimeError(str(exc)) from exc
        approvals = tuple(self._approval(part, requests.metadata.get(part.tool_call_id) or {})
                          for part in requests.approvals)
        snapshot = dump_snapshot(self.name, messages, call.tool_call_id if call else None)
        if not approvals:
            assert call is not None
            return Outcome.asking(call, snapshot)
        snapshot[PENDING_APPROVALS] = [a.tool_call_id for a in approvals]
        return Outcome.deferring(call, approvals, snapshot)

    def _approval(self, part: ToolCallPart, meta: dict[str, Any]) -> ToolApprovalRequest:
        args = meta.get("args")
        return ToolApprovalRequest(
            tool_call_id=part.tool_call_id,
            tool=part.tool_name,
            description=str(meta.get("description") or ""),
            args=dict(args) if isinstance(args, dict) else part.args_as_dict(),
            fixed=dict(meta.get("fixed") or {}),
            binding=self._binding(part),
            route=meta.get("route"),
            grant_scope=meta.get("grant_scope"),
            editable=tuple(str(n) for n in meta.get("editable") or ()),
            schema=dict(meta.get("schema") or {}),
            call_args=part.args_as_dict() if meta.get("editable") else None,
        )


def _pending_calls(history: list[ModelMessage]) -> dict[str, ToolCallPart]:
    """The tool calls of the last model response (the step the run stopped on)."""
    for message in reversed(history):
        if isinstance(message, ModelResponse):
            return {p.tool_call_id: p for p in message.parts if isinstance(p, ToolCallPart)}
    return {}


def _close_only_call(
    history: list[ModelMessage], call_id: str, result: AskHumanToolResult
) -> list[ModelMessage] | None:
    """The history with the answer appended as the tool return of ``call_id``, when that
    is the only call the run stopped on (else None: ``DeferredToolResults`` handles it).

    pydantic-ai continues a history that ends in a request without a new prompt, so the
    run is the same model call over the same messages as with ``DeferredToolResults``
    (tests compare the two), minus the graph step that would build this request: about
    a sixth of the CPU of a resume.
    """
    last = history[-1] if history else None
    if not isinstance(last, ModelResponse):
        return None
    calls = [p for p in last.parts if isinstance(p, ToolCallPart)]
    if len(calls) != 1 or calls[0].tool_call_id != call_id:
        return None
    answer = ToolReturnPart(calls[0].tool_name, result.model_dump(mode="json"),
                            tool_call_id=call_id)
    return [*history, ModelRequest(parts=[answer])]


def _as_list(value: JsonValue) -> list[JsonValue]:
    return value if isinstance(value, list) else []
