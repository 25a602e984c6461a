"""Slack message ``state.values`` and modal ``view.state.values`` → contract values."""

from __future__ import annotations

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
)
from renderers.card import RequestCard, args_of, option_value
from renderers.slack.ids import INPUT_ACTION_ID, field_for_block


def read_values(
    state_values: Mapping[str, Any], card_or_args: RequestCard | AskHumanToolArgs
) -> dict[str, JsonValue]:
    """Message ``state.values`` or modal ``view.state.values`` → contract values.

    Blocks of other versions of the same card are accepted (matched on the field
    name inside the block id); the current version wins, then the newest.
    Missing or empty inputs are omitted; validation is the engine's job.
    """
    args = args_of(card_or_args)
    current = card_or_args.version if isinstance(card_or_args, RequestCard) else None
    chosen: dict[str, tuple[tuple[bool, int], Mapping[str, Any]]] = {}
    for bid, actions in state_values.items():
        found = field_for_block(args, bid)
        state = _element_state(actions)
        if found is None or state is None:
            continue
        version, field = found
        rank = (version == current, version)
        if field.name not in chosen or rank > chosen[field.name][0]:
            chosen[field.name] = (rank, state)
    values: dict[str, JsonValue] = {}
    for field in args.fields:
        if field.name in chosen:
            value = _read_state(field, chosen[field.name][1])
            if value is not None:
                values[field.name] = value
    return values


def read_input(field: AskHumanField, actions: object) -> JsonValue:
    """One input block's state (``state.values[block_id]``) → the field's value."""
    state = _element_state(actions)
    return _read_state(field, state) if state is not None else None


def _element_state(actions: object) -> Mapping[str, Any] | None:
    if not isinstance(actions, Mapping) or not actions:
        return None
    state = actions.get(INPUT_ACTION_ID, next(iter(actions.values())))
    return state if isinstance(state, Mapping) else None


def _read_state(field: AskHumanField, state: Mapping[str, Any]) -> JsonValue:
    """One element's state → the contract's value type (None when empty)."""
    if isinstance(field, ParagraphField | NumberField):
        value = state.get("value")
        return value if isinstance(value, str) and value.strip() else None
    if isinstance(field, SelectField):
        picked = state.get("selected_option")
        token = picked.get("value") if isinstance(picked, dict) else None
        return option_value(field.options, token)
    if isinstance(field, MultiSelectField):
        tokens = [o.get("value") for o in _list(state.get("selected_options")) if _is_dict(o)]
        chosen = [v for v in (option_value(field.options, t) for t in tokens) if v is not None]
        return list(chosen) or None
    if isinstance(field, CheckboxField):
        picked = _list(state.get("selected_options"))
        return any(isinstance(o, dict) and o.get("value") == "true" for o in picked)
    if isinstance(field, DateField):
        date = state.get("selected_date")
        return date if isinstance(date, str) and date else None
    files = [_file_ref(f) for f in _list(state.get("files")) if isinstance(f, dict)]
    return list(files) or None


def _is_dict(value: object) -> bool:
    return isinstance(value, dict)


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _file_ref(file: Mapping[str, Any]) -> JsonValue:
    """A Slack file object → the contract's file reference (checked by the engine)."""
    size = file.get("size")
    return {
        "platform": "slack",
        "id": str(file.get("id", "")),
        "name": str(file.get("name") or file.get("title") or ""),
        "mimetype": str(file.get("mimetype", "")),
        "size": size if isinstance(size, int) and not isinstance(size, bool) else None,
        "url": str(file.get("url_private_download") or file.get("url_private") or ""),
    }
