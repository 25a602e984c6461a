"""A scripted model for tool tests: call the given tools, then report every result."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

Call = tuple[str, dict[str, Any]]


def returns(messages: list[ModelMessage]) -> list[tuple[str, str, str]]:
    """``(tool, outcome, content)`` for every tool result the model has seen, in order."""
    seen = []
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                content = part.content if isinstance(part.content, str) else json.dumps(
                    part.content, default=str)
                seen.append((part.tool_name, part.outcome, content))
            elif isinstance(part, RetryPromptPart) and part.tool_name:
                seen.append((part.tool_name, "retry", str(part.content)))
    return seen


class Scripted:
    """Step N of a run calls ``steps[N]`` (ids ``cN_M``); after the last step it reports,
    one line per result: ``tool outcome: content``. ``steps`` may be replaced between
    runs, so one runtime (and its MCP sessions) serves several scripted runs."""

    def __init__(self, *steps: Sequence[Call], seen_tools: list[Any] | None = None) -> None:
        self.steps: tuple[Sequence[Call], ...] = steps
        self.seen_tools = seen_tools
        self.model = FunctionModel(self.respond, model_name="scripted:test-tools")

    def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if self.seen_tools is not None:
            self.seen_tools[:] = list(info.function_tools)
        step = sum(isinstance(m, ModelResponse) for m in messages)
        if step < len(self.steps):
            return ModelResponse(parts=[
                ToolCallPart(name, args, tool_call_id=f"c{step}_{j}")
                for j, (name, args) in enumerate(self.steps[step])])
        lines = [f"{tool} {outcome}: {content}" for tool, outcome, content in returns(messages)]
        return ModelResponse(parts=[TextPart("\n".join(lines) or "no tool results")])


def calling(*steps: Sequence[Call], seen_tools: list[Any] | None = None) -> FunctionModel:
    """A model that runs ``Scripted(*steps)``."""
    return Scripted(*steps, seen_tools=seen_tools).model
