"""The model-visible ``ask_human`` tool and the deferred-call payload builder.

The tool is *external*: pydantic-ai never runs it, the run simply ends with a
``DeferredToolRequests``. Bad arguments become ``ModelRetry`` so the model gets a
chance to fix them instead of crashing the run; problems only detectable after the
run (two calls, approvals, a renamed tool) fail the run, exactly as in Dify.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pydantic_ai import ModelRetry, RunContext, Tool
from pydantic_ai.tools import DeferredToolRequests, ToolDefinition

from bot.askhuman.args import (
    MAX_DEFAULT_CHARS,
    MAX_IDENTIFIER_CHARS,
    MAX_OPTION_CHARS,
    MAX_OPTIONS,
    MAX_PLACEHOLDER_CHARS,
    MAX_TITLE_CHARS,
    PROMPT_HINT_TEMPLATE,
    build_prompt_hint,
    tool_parameters_schema,
    validate_and_normalize_args,
)
from bot.askhuman.config import DIFY_ASK_HUMAN_LAYER_TYPE_ID, SCHEMA_VERSION, AskHumanConfig
from bot.askhuman.schema import AskHumanAction, AskHumanField, DeferredToolCallPayload

__all__ = [
    "MAX_DEFAULT_CHARS", "MAX_IDENTIFIER_CHARS", "MAX_OPTIONS", "MAX_OPTION_CHARS",
    "MAX_PLACEHOLDER_CHARS", "MAX_TITLE_CHARS", "NEVER_EXECUTED_MESSAGE",
    "PROMPT_HINT_TEMPLATE", "build_ask_human_tool",
    "build_deferred_tool_call_payload", "build_prompt_hint", "tool_parameters_schema",
    "validate_and_normalize_args",
]
"""The argument checks live in ``args.py`` (no pydantic-ai); named here as before."""

NEVER_EXECUTED_MESSAGE = (
    "ask_human is an external deferred tool and should not execute during the initial run"
)


def build_ask_human_tool(config: AskHumanConfig) -> Tool[Any] | None:
    """The pydantic-ai tool the agent sees, or None when the layer is disabled."""
    if not config.enabled:
        return None

    schema = tool_parameters_schema(config)  # once per config, not once per step

    async def prepare(ctx: RunContext[Any], tool_def: ToolDefinition) -> ToolDefinition:
        return ToolDefinition(
            name=config.tool_name,
            description=config.effective_description,
            parameters_json_schema=schema,
            strict=False,
            sequential=True,
            kind="external",
        )

    def validate(
        ctx: RunContext[Any],
        title: str | None = None,
        question: str = "",
        markdown: str | None = None,
        fields: list[AskHumanField] | None = None,
        actions: list[AskHumanAction] | None = None,
        urgency: str = "normal",
    ) -> None:
        raw = {
            "title": title,
            "question": question,
            "markdown": markdown,
            "fields": [f.model_dump() for f in fields or []],
            "actions": [a.model_dump() for a in actions or []],
            "urgency": urgency,
        }
        try:
            validate_and_normalize_args(raw, config)
        except (ValidationError, ValueError) as exc:
            raise ModelRetry(str(exc)) from exc

    def never_executed(
        ctx: RunContext[Any],
        title: str | None = None,
        question: str = "",
        markdown: str | None = None,
        fields: list[AskHumanField] | None = None,
        actions: list[AskHumanAction] | None = None,
        urgency: str = "normal",
    ) -> None:
        raise RuntimeError(NEVER_EXECUTED_MESSAGE)

    return Tool(
        never_executed,
        takes_ctx=True,
        name=config.tool_name,
        description=config.effective_description,
        prepare=prepare,
        args_validator=validate,
        sequential=True,
    )


def build_deferred_tool_call_payload(
    requests: DeferredToolRequests, config: AskHumanConfig
) -> DeferredToolCallPayload:
    """Turn the run's deferred requests into Dify's payload; errors here fail the run."""
    if requests.approvals:
        raise ValueError(
            "ask_human does not support approval requests; use external deferred calls only"
        )
    if len(requests.calls) != 1:
        raise ValueError(
            "ask_human supports exactly one deferred call per run in this version; "
            f"got {len(requests.calls)}."
        )
    call = requests.calls[0]
    if call.tool_name != config.tool_name:
        raise ValueError(
            f"ask_human deferred tool name must be '{config.tool_name}', got '{call.tool_name}'."
        )
    args = validate_and_normalize_args(call.args, config)
    return DeferredToolCallPayload(
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        args=args.model_dump(mode="json"),
        metadata={
            "layer_type": DIFY_ASK_HUMAN_LAYER_TYPE_ID,
            "tool_name": config.tool_name,
            "schema_version": SCHEMA_VERSION,
        },
    )
