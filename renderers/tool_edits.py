"""The inputs of "Edit and approve": one typed input per editable argument.

A tool-approval card whose tool has ``editable`` arguments (``ToolApprovalView``)
offers ``approve_edit``. Each editable argument becomes a contract field built from
its JSON Schema and prefilled with the call's value: integer / number → a number
field (with the schema's bounds), an ``enum`` → a select, boolean → a checkbox,
string → text, anything else → JSON text. The fields are named ``edit_<index>`` (an
argument name need not be an identifier); ``named_edits`` maps them back. A platform
sends what was typed as the answer's ``edited`` value (``EDITED``); the engine
converts and validates it against the schema (``bot.engine.edits``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import JsonValue

from bot.askhuman.schema import (
    AskHumanField,
    CheckboxField,
    NumberField,
    ParagraphField,
    SelectField,
    SelectOption,
)
from renderers import i18n
from renderers.card import ToolApprovalView

EDITED = "edited"
"""The answer's value holding the edited arguments (argument name → typed text/value)."""
PREFIX = "edit_"
LONG_TEXT = 80
"""A string longer than this (or with a line break) gets a multi-line input."""
MAX_EDIT_FIELDS = 20


def edit_key(index: int) -> str:
    return f"{PREFIX}{index}"


def prop_of(view: ToolApprovalView, name: str) -> dict[str, Any]:
    """The JSON Schema of one editable argument ({} when unknown)."""
    properties = view.schema.get("properties") if isinstance(view.schema, Mapping) else None
    prop = properties.get(name) if isinstance(properties, Mapping) else None
    return dict(prop) if isinstance(prop, Mapping) else {}


def current_value(view: ToolApprovalView, name: str) -> JsonValue:
    """The call's value of ``name`` now (after any earlier edit), None if it has none."""
    return next((a.value for a in view.args if a.name == name and not a.fixed), None)


def option_text(value: JsonValue) -> str:
    """An ``enum`` member as an option value (strings as is, others as JSON)."""
    return value if isinstance(value, str) else json.dumps(value)


def kind_of(prop: Mapping[str, Any]) -> str:
    """``enum``, ``number``, ``boolean``, ``string`` or ``json`` (the input to show)."""
    if isinstance(prop.get("enum"), list) and prop["enum"]:
        return "enum"
    kinds = prop.get("type")
    found = [kinds] if isinstance(kinds, str) else list(kinds or [])
    for option in prop.get("anyOf") or []:
        if isinstance(option, Mapping) and isinstance(option.get("type"), str):
            found.append(option["type"])
    found = [k for k in found if k != "null"]
    if found and all(k in ("integer", "number") for k in found):
        return "number"
    if found == ["boolean"]:
        return "boolean"
    if found == ["string"] or not found:
        return "string"
    return "json"


def value_text(value: JsonValue, kind: str) -> str:
    """The prefilled text of an input."""
    if value is None:
        return ""
    if kind == "string" and isinstance(value, str):
        return value
    return option_text(value) if kind == "enum" else json.dumps(value, ensure_ascii=False)


def edit_fields(view: ToolApprovalView) -> list[AskHumanField]:
    """One prefilled contract field per editable argument (``edit_<index>``)."""
    fields: list[AskHumanField] = []
    for index, name in enumerate(view.editable[:MAX_EDIT_FIELDS]):
        prop = prop_of(view, name)
        kind = kind_of(prop)
        value = current_value(view, name)
        label = name[:100] or "?"
        key = edit_key(index)
        if kind == "enum":
            options = [SelectOption(value=option_text(o), label=option_text(o)[:75] or "?")
                       for o in prop["enum"][:100] if option_text(o).strip()]
            chosen = option_text(value) if value is not None else None
            fields.append(SelectField(name=key, label=label, options=options,
                                      default=chosen if chosen in
                                      [o.value for o in options] else None))
        elif kind == "number":
            fields.append(NumberField(
                name=key, label=label, default=value if isinstance(value, int | float)
                and not isinstance(value, bool) else None,
                min_value=_bound(prop, "minimum"), max_value=_bound(prop, "maximum")))
        elif kind == "boolean":
            fields.append(CheckboxField(name=key, label=label, default=bool(value)))
        else:
            hint = i18n.t("edit.json_hint") if kind == "json" else None
            fields.append(ParagraphField(name=key, label=label, placeholder=hint,
                                         default=value_text(value, kind) or None))
    return fields


def _bound(prop: Mapping[str, Any], key: str) -> int | float | None:
    value = prop.get(key)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def named_edits(view: ToolApprovalView, values: Mapping[str, Any]) -> dict[str, Any]:
    """``{edit_<index>: typed}`` read from a form or modal → ``{argument: typed}``."""
    out: dict[str, Any] = {}
    for index, name in enumerate(view.editable[:MAX_EDIT_FIELDS]):
        key = edit_key(index)
        if key in values:
            out[name] = values[key]
    return out
