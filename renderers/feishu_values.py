"""Feishu card callbacks → contract values: the button's ``(ref, action)``, the form's
inputs and a tool card's edits, read back with the identifier scheme
``renderers.feishu`` writes (form fields ``f_{name}``, option values ``o{index}``)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

from pydantic import JsonValue

from bot.askhuman.schema import (
    AskHumanField,
    AskHumanToolArgs,
    CheckboxField,
    DateField,
    MultiSelectField,
    NumberField,
    ParagraphField,
    SelectField,
    is_identifier,
)
from renderers.card import MAX_REF_CHARS, WITHDRAW_TOKEN, RequestCard, args_of, option_value
from renderers.tool_edits import edit_fields, named_edits

MAX_ID_CHARS = 255
"""Longest action id a callback may name (longer ones were never on a card)."""


def field_key(field: AskHumanField) -> str:
    """The form ``name`` of a field (prefixed so it never collides with buttons)."""
    return f"f_{field.name}"


def parse_callback_value(value: object) -> tuple[str, str] | None:
    """``(ref, action id)`` from a button's callback value (object or JSON string)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, dict):
        return None
    ref, action = value.get("r"), value.get("a")
    if value.get("w") == 1 and "a" not in value:
        action = WITHDRAW_TOKEN  # the "Withdraw" menu item
        return (ref, action) if isinstance(ref, str) and 0 < len(ref) <= MAX_REF_CHARS else None
    if (isinstance(ref, str) and 0 < len(ref) <= MAX_REF_CHARS and isinstance(action, str)
            and len(action) <= MAX_ID_CHARS and is_identifier(action)):
        return ref, action
    return None


def read_values(
    form_value: Mapping[str, Any] | None, card_or_args: RequestCard | AskHumanToolArgs
) -> dict[str, JsonValue]:
    """``action.form_value`` → contract values; missing or empty inputs are omitted.

    File fields never appear here: Feishu has no upload component, so files arrive
    as thread replies and the adapter collects them.
    """
    args = args_of(card_or_args)
    values: dict[str, JsonValue] = {}
    for field in args.fields:
        raw = (form_value or {}).get(field_key(field))
        if raw is None:
            continue
        value = _read(field, raw)
        if value is not None:
            values[field.name] = value
    return values


def read_edits(form_value: Mapping[str, Any] | None, card: RequestCard) -> dict[str, JsonValue]:
    """The "Edit and approve" inputs of a tool card's form → ``{argument: typed}``."""
    if card.tool is None or not card.tool.editable:
        return {}
    fields = edit_fields(card.tool)
    values: dict[str, JsonValue] = {}
    for field in fields:
        raw = (form_value or {}).get(field_key(field))
        value = _read(field, raw) if raw is not None else None
        if value is not None:
            values[field.name] = value
    return named_edits(card.tool, values)


def _read(field: AskHumanField, raw: object) -> JsonValue:
    """One form entry → the contract's value type (None when empty)."""
    if isinstance(field, ParagraphField | NumberField):
        return raw if isinstance(raw, str) and raw.strip() else None
    if isinstance(field, SelectField):
        return option_value(field.options, raw)
    if isinstance(field, MultiSelectField):
        items = raw if isinstance(raw, list) else []
        chosen = [v for v in (option_value(field.options, t) for t in items) if v is not None]
        return list(chosen) or None
    if isinstance(field, CheckboxField):
        if isinstance(raw, bool):
            return raw
        return str(raw).strip().lower() == "true" if str(raw).strip() else None
    if isinstance(field, DateField):
        return _date(raw)
    return None


def _date(raw: object) -> str | None:
    """Feishu sends ``"2024-04-01 +0800"``; the contract wants ``2024-04-01``."""
    head = raw.strip().split(" ")[0] if isinstance(raw, str) else ""
    try:
        return dt.date.fromisoformat(head).isoformat() if head else None
    except ValueError:
        return None
