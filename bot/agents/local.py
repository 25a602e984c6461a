"""The embedded runtime: a pydantic-ai ``Agent`` with the ask_human external tool.

The run uses the "stop the world" style: ``DeferredToolRequests`` is an allowed
output type, so asking a human ends the run and the full message history becomes
the snapshot. Resuming is a new run over that history with the human's result.
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue, ValidationError
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.exceptions import UnexpectedModelBehavior, UserError
from pydantic_ai.models import Model

from bot.agents.base import AgentRuntimeError, Outcome, ResumeMismatchError
from bot.agents.models import resolve_model
from bot.agents.snapshot import dump_snapshot, load_messages
from bot.agents.spec import AgentSpec
from bot.askhuman.schema import AskHumanToolResult
from bot.askhuman.tool import (
    build_ask_human_tool,
    build_deferred_tool_call_payload,
    build_prompt_hint,
)


class LocalRuntime:
    """Runs one ``AgentSpec`` in-process."""

    def __init__(self, spec: AgentSpec, model: Model | None = None) -> None:
        self.name = spec.name
        self.spec = spec
        tool = build_ask_human_tool(spec.ask_human)
        instructions = [
            text for text in (spec.instructions, build_prompt_hint(spec.ask_human)) if text
        ]
        output_type: Any = [str, DeferredToolRequests] if tool else str
        self._agent: Agent[None, Any] = Agent(
            model or resolve_model(spec.model, spec.ask_human.tool_name),
            output_type=output_type,
            instructions="\n\n".join(instructions) or None,
            tools=[tool] if tool else [],
            name=spec.name,
        )

    async def run(self, prompt: str) -> Outcome:
        if not prompt.strip():
            raise AgentRuntimeError("run.user_prompts must not be empty")
        return await self._run(prompt, history=None, results=None)

    async def resume(
        self, snapshot: dict[str, JsonValue], results: dict[str, AskHumanToolResult]
    ) -> Outcome:
        history = load_messages(snapshot, self.name)
        pending = snapshot.get("pending_tool_call_id")
        if pending is None:
            raise ResumeMismatchError(
                "this snapshot has no pending ask_human call, so there is nothing to resume"
            )
        if set(results) != {pending}:
            raise ResumeMismatchError(
                f"resume results must answer tool_call_id {pending!r}, got {sorted(results)!r}"
            )
        deferred = DeferredToolResults(
            calls={call_id: result.model_dump(mode="json") for call_id, result in results.items()}
        )
        return await self._run(None, history=history, results=deferred)

    async def _run(
        self, prompt: str | None, history: Any, results: DeferredToolResults | None
    ) -> Outcome:
        try:
            result = await self._agent.run(
                prompt, message_history=history, deferred_tool_results=results
            )
        except (UserError, UnexpectedModelBehavior, ValidationError) as exc:
            raise AgentRuntimeError(str(exc)) from exc
        messages = result.all_messages()
        if isinstance(result.output, DeferredToolRequests):
            try:
                call = build_deferred_tool_call_payload(result.output, self.spec.ask_human)
            except (ValueError, ValidationError) as exc:
                raise AgentRuntimeError(str(exc)) from exc
            return Outcome.asking(call, dump_snapshot(self.name, messages, call.tool_call_id))
        return Outcome.finished(result.output, dump_snapshot(self.name, messages, None))
