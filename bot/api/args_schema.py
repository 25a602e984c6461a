"""The ask_human args schema with every cap the validation enforces, for the API document.

``tool_parameters_schema`` is Dify's schema exactly (what models see), which leaves
the guardrails to ``validate_and_normalize_args``. An API client generated from the
OpenAPI document needs them in the schema, or it sends what the server refuses; so
this module takes that same model-derived schema and writes the guardrails of one
``AskHumanConfig`` into it (lengths, counts, identifier patterns, non-blank text),
from the same constants the validation reads. ``tests/api/test_openapi_contract.py``
generates bodies from the document and checks the validation agrees both ways.

What JSON Schema cannot say is left to the validation and named in the
descriptions: unique field names, action ids and option values, a select default
that is one of its options, ``min_value <= max_value``.
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Any

from bot.askhuman.args import (
    MAX_DEFAULT_CHARS,
    MAX_IDENTIFIER_CHARS,
    MAX_OPTION_CHARS,
    MAX_OPTIONS,
    MAX_PLACEHOLDER_CHARS,
    MAX_TITLE_CHARS,
    tool_parameters_schema,
)
from bot.askhuman.config import AskHumanConfig
from bot.askhuman.schema import FILE_FIELD_TYPES

IDENTIFIER = f"^[A-Za-z_][A-Za-z0-9_]{{0,{MAX_IDENTIFIER_CHARS - 1}}}$"
CROSS_FIELD_RULES = ("Field names and action ids are unique, select option values are "
                     "unique, a select default is one of its option values and a number "
                     "field's min_value is at most its max_value.")


@functools.cache
def _whitespace_class() -> str:
    """A regex class of exactly the characters ``str.strip()`` removes.

    ``\\s`` differs between regex engines (ECMA-262 vs Python) at the edges, so the
    class is spelled out, in escapes every engine reads the same way."""
    ranges: list[tuple[int, int]] = []
    for code in range(sys.maxunicode + 1):
        if chr(code).isspace():
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    parts = [f"\\u{lo:04x}" if lo == hi else f"\\u{lo:04x}-\\u{hi:04x}" for lo, hi in ranges]
    return "".join(parts)


def non_blank_pattern() -> str:
    """A pattern (unanchored) for text that is not only whitespace: Dify's "must not be
    blank"."""
    return f"[^{_whitespace_class()}]"


def _text(max_length: int | None = None, *, not_blank: bool = False,
          nullable: bool = False, **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", **({"minLength": 1} if not_blank else {}),
                              **extra}
    if max_length is not None:
        schema["maxLength"] = max_length
    if not_blank:
        schema["pattern"] = non_blank_pattern()
    if nullable:
        return {"anyOf": [schema, {"type": "null"}], "default": None}
    return schema


def _constrain_field(variant: dict[str, Any], config: AskHumanConfig) -> None:
    props = variant["properties"]
    variant["required"] = sorted({*variant.get("required", []), "type"})
    props["name"] = _text(pattern=IDENTIFIER, minLength=1,
                          description="An identifier ([A-Za-z_][A-Za-z0-9_]*).")
    props["label"] = _text(config.max_field_label_chars, not_blank=True)
    if "options" in props:  # defaults to [], which the validation refuses: required
        props["options"].update({"minItems": 1, "maxItems": MAX_OPTIONS})
        variant["required"] = sorted({*variant["required"], "options"})
    if "placeholder" in props:
        props["placeholder"] = _text(MAX_PLACEHOLDER_CHARS, nullable=True)
    default = props.get("default", {})
    if {"type": "string"} in default.get("anyOf", []):
        date: dict[str, Any] = {"format": "date", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}
        is_date = props["type"].get("const") == "date"
        props["default"] = _text(MAX_DEFAULT_CHARS, nullable=True, **(date if is_date else {}))


def allowed_types(config: AskHumanConfig) -> set[str]:
    """The field types the validation takes under ``config`` (file types need both
    ``allowed_field_types`` and ``allow_file_fields``)."""
    return {t for t in config.allowed_field_types
            if t not in FILE_FIELD_TYPES or config.allow_file_fields}


def _only_allowed_types(schema: dict[str, Any], defs: dict[str, Any],
                        config: AskHumanConfig) -> None:
    union = schema["properties"]["fields"]["items"]
    allowed = allowed_types(config)
    mapping: dict[str, str] = union["discriminator"]["mapping"]
    for field_type, ref in list(mapping.items()):
        if field_type not in allowed:
            del mapping[field_type]
            defs.pop(ref.rsplit("/", 1)[-1], None)
    union["oneOf"] = [{"$ref": ref} for ref in mapping.values()]
    if not mapping:  # no field type allowed: fields must be empty
        schema["properties"]["fields"]["items"] = {"not": {}}


def args_schema(config: AskHumanConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(AskHumanToolArgs schema, its $defs)`` under ``config``'s guardrails.

    References point at ``#/components/schemas/<name>``, ready for the document."""
    schema = tool_parameters_schema(config)
    defs: dict[str, Any] = schema.pop("$defs")
    _only_allowed_types(schema, defs, config)
    props = schema["properties"]
    props["title"] = _text(MAX_TITLE_CHARS, not_blank=True, nullable=True)
    props["question"] = _text(config.max_question_chars, not_blank=True)
    props["markdown"] = _text(config.max_markdown_chars, nullable=True)
    props["fields"]["maxItems"] = config.max_fields
    props["actions"]["maxItems"] = config.max_actions
    props["actions"]["description"] = "Empty: one primary action, Submit, is added."
    schema["description"] = (f"{schema.get('description', '')} {CROSS_FIELD_RULES}").strip()
    for name, definition in defs.items():
        if name.endswith("Field"):
            _constrain_field(definition, config)
    defs["SelectOption"]["properties"].update(
        value=_text(MAX_OPTION_CHARS, not_blank=True),
        label=_text(MAX_OPTION_CHARS, not_blank=True))
    defs["AskHumanAction"]["properties"].update(
        id=_text(pattern=IDENTIFIER, minLength=1),
        label=_text(config.max_action_label_chars, not_blank=True))
    return _rebase(schema), _rebase(defs)


def _rebase(node: Any) -> Any:
    """``#/$defs/X`` → ``#/components/schemas/X`` (the document's home for schemas)."""
    return json.loads(json.dumps(node).replace('"#/$defs/', '"#/components/schemas/'))
