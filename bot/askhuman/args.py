"""The ``ask_human`` arguments: the checks in Dify's order, askhuman's own caps, the
JSON schema shown to models and API clients, and the guardrail prompt.

Apart from the pydantic-ai tool (``tool.py``) so that the engine, the HTTP API and MCP,
which check arguments without running a model, do not import pydantic-ai.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any

from bot.askhuman.config import AskHumanConfig
from bot.askhuman.schema import (
    DIFY_FIELD_TYPES,
    FILE_FIELD_TYPES,
    AskHumanAction,
    AskHumanToolArgs,
)

PROMPT_HINT_TEMPLATE = (
    "You may call the external tool '{tool_name}' only when human input is required to "
    "continue. Do not ask a human for information that can be inferred from the "
    "conversation, current context, or other tools.\n\n"
    "Ask-human guardrails:\n"
    "- Allowed field types: {allowed}.\n"
    "- File upload fields are {files}.\n"
    "- {fields_rule}\n"
    "- Use at most {max_actions} action(s).\n"
    "- Keep 'question' under {max_question_chars} characters.\n"
    "- Keep 'markdown' under {max_markdown_chars} characters.\n"
    "- Keep each field label under {max_field_label_chars} characters.\n"
    "- Keep each action label under {max_action_label_chars} characters.\n"
    "- If you omit actions, the system will add one primary action: Submit.\n"
    "Prefer concise, structured requests that stay comfortably within these limits."
)


MAX_TITLE_CHARS = 300
MAX_IDENTIFIER_CHARS = 64
MAX_OPTIONS = 100
MAX_OPTION_CHARS = 200
MAX_PLACEHOLDER_CHARS = 500
MAX_DEFAULT_CHARS = 3000
"""Caps beyond Dify's for text Dify leaves unbounded (titles, ids, options, prefills):
cards carry these into buttons and callbacks, so an oversize one is a ModelRetry."""


def _check_extra_limits(args: AskHumanToolArgs) -> None:
    """Askhuman's own caps (see ``MAX_TITLE_CHARS``), after Dify's checks."""
    if args.title is not None and len(args.title) > MAX_TITLE_CHARS:
        raise ValueError(f"ask_human title must be <= {MAX_TITLE_CHARS} characters")
    for action in args.actions:
        if len(action.id) > MAX_IDENTIFIER_CHARS:
            raise ValueError(f"ask_human action id must be <= {MAX_IDENTIFIER_CHARS} characters")
    for field in args.fields:
        name = field.name
        if len(name) > MAX_IDENTIFIER_CHARS:
            raise ValueError(f"ask_human field name must be <= {MAX_IDENTIFIER_CHARS} characters")
        options = getattr(field, "options", None) or []
        if len(options) > MAX_OPTIONS:
            raise ValueError(f"ask_human field '{name}' must have at most {MAX_OPTIONS} options")
        if any(len(o.value) > MAX_OPTION_CHARS or len(o.label) > MAX_OPTION_CHARS
               for o in options):
            raise ValueError(f"ask_human field '{name}' option values and labels must be <= "
                             f"{MAX_OPTION_CHARS} characters")
        placeholder = getattr(field, "placeholder", None)
        if isinstance(placeholder, str) and len(placeholder) > MAX_PLACEHOLDER_CHARS:
            raise ValueError(f"ask_human field '{name}' placeholder must be <= "
                             f"{MAX_PLACEHOLDER_CHARS} characters")
        default = getattr(field, "default", None)
        if isinstance(default, str) and len(default) > MAX_DEFAULT_CHARS:
            raise ValueError(f"ask_human field '{name}' default must be <= "
                             f"{MAX_DEFAULT_CHARS} characters")


def build_prompt_hint(config: AskHumanConfig) -> str | None:
    """The guardrail text prepended to the agent's instructions (None when disabled)."""
    if not config.enabled:
        return None
    if config.max_fields == 0:
        fields_rule = "Do not add any fields."
    else:
        fields_rule = f"Use at most {config.max_fields} field(s)."
    return PROMPT_HINT_TEMPLATE.format(
        tool_name=config.tool_name,
        allowed=", ".join(config.allowed_field_types) or "none",
        files="enabled" if config.allow_file_fields else "disabled",
        fields_rule=fields_rule,
        max_actions=config.max_actions,
        max_question_chars=config.max_question_chars,
        max_markdown_chars=config.max_markdown_chars,
        max_field_label_chars=config.max_field_label_chars,
        max_action_label_chars=config.max_action_label_chars,
    )


def validate_and_normalize_args(
    raw: str | dict[str, Any] | None, config: AskHumanConfig, *, strict: bool = False
) -> AskHumanToolArgs:
    """Parse and check model arguments in Dify's order; raise ValueError/ValidationError.

    ``strict`` refuses what pydantic would coerce (``0`` for ``false``, ``"1"`` for
    ``1``): the HTTP API holds clients to its published JSON Schema, while a model's
    tool call keeps Dify's lenient parsing."""
    if isinstance(raw, str):
        args = AskHumanToolArgs.model_validate_json(raw or "{}", strict=strict)
    else:
        args = AskHumanToolArgs.model_validate(raw or {}, strict=strict)
    if len(args.fields) > config.max_fields:
        raise ValueError(f"ask_human fields must contain at most {config.max_fields} item(s)")
    if not args.actions:
        args.actions = [AskHumanAction(id="submit", label="Submit", style="primary")]
    if len(args.actions) > config.max_actions:
        raise ValueError(f"ask_human actions must contain at most {config.max_actions} item(s)")
    if len(args.question) > config.max_question_chars:
        raise ValueError(f"ask_human question must be <= {config.max_question_chars} characters")
    if args.markdown is not None and len(args.markdown) > config.max_markdown_chars:
        raise ValueError(f"ask_human markdown must be <= {config.max_markdown_chars} characters")
    for field in args.fields:
        if field.type not in config.allowed_field_types:
            raise ValueError(
                f"ask_human field type '{field.type}' is not allowed by this layer config"
            )
        if len(field.label) > config.max_field_label_chars:
            raise ValueError(
                f"ask_human field label '{field.label}' must be <= "
                f"{config.max_field_label_chars} characters"
            )
        if field.type in FILE_FIELD_TYPES and not config.allow_file_fields:
            raise ValueError("ask_human file fields are disabled by this layer config")
    for action in args.actions:
        if len(action.label) > config.max_action_label_chars:
            raise ValueError(
                f"ask_human action label '{action.label}' must be <= "
                f"{config.max_action_label_chars} characters"
            )
    _check_extra_limits(args)
    return args


def tool_parameters_schema(config: AskHumanConfig) -> dict[str, Any]:
    """``AskHumanToolArgs``' JSON schema, showing extension field types only when allowed.

    With Dify's defaults this is exactly Dify's schema (the four Dify variants), so a
    model prompted for Dify behaves the same here.
    """
    return copy.deepcopy(_parameters_schema(frozenset(config.allowed_field_types)))


@lru_cache(maxsize=64)
def _parameters_schema(allowed: frozenset[str]) -> dict[str, Any]:
    """The schema for one set of allowed field types, built once.

    ``model_json_schema()`` costs milliseconds, and the tool's ``prepare`` asks for the
    schema on every run and resume step; callers get a copy (see ``tool_parameters_schema``).
    """
    schema = AskHumanToolArgs.model_json_schema()
    shown = set(DIFY_FIELD_TYPES) | allowed
    union = schema["properties"]["fields"]["items"]
    union["oneOf"] = [ref for ref in union["oneOf"] if _variant_type(schema, ref["$ref"]) in shown]
    mapping = union["discriminator"]["mapping"]
    union["discriminator"]["mapping"] = {k: v for k, v in mapping.items() if k in shown}
    kept = {ref["$ref"].rsplit("/", 1)[-1] for ref in union["oneOf"]}
    dropped = {_variant_name(t) for t in mapping if t not in shown} - kept
    for name in dropped:
        schema["$defs"].pop(name, None)
    return schema


def _variant_type(schema: dict[str, Any], ref: str) -> str:
    definition = schema["$defs"][ref.rsplit("/", 1)[-1]]
    return str(definition["properties"]["type"]["const"])


def _variant_name(field_type: str) -> str:
    from bot.askhuman.schema import FIELD_MODELS

    return FIELD_MODELS[field_type].__name__
