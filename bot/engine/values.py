"""Check a human's answer against the request's own fields and actions.

Everything a platform sends back is untrusted: values are parsed and checked here,
never trusted from the card. Reasons are written for the person who clicked.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import JsonValue

from bot.askhuman.schema import (
    AskHumanAction,
    AskHumanToolArgs,
    CheckboxField,
    DateField,
    FileField,
    FileListField,
    MultiSelectField,
    NumberField,
    ParagraphField,
    SelectField,
)
from renderers.words import Said, said

FILE_KEYS = ("platform", "id", "name", "mimetype", "size", "url")
MAX_TEXT_CHARS = 10_000
"""Longest text answer accepted (Slack inputs stop at 3,000, Feishu's at 1,000)."""
MAX_LIST_ITEMS = 100
"""Most items in one multi-select answer (or more, if the field offers more options)."""
MAX_FILES = 20
"""Most files in one file-list answer when the field sets no ``max_files``."""
MAX_FILES_HARD = 100
"""Most files in one answer whatever the (model-written) ``max_files`` says."""
MAX_DEPTH = 4
"""Deepest nesting of one value (a file list is ``[{...}]``: depth 2)."""
MAX_VALUE_CHARS = 64_000
"""Most characters (all strings and keys together) in one field's value."""
_FILE_TEXT_LIMITS = {"platform": 32, "id": 255, "name": 255, "mimetype": 255, "url": 2048}
_TRUE = {"true", "yes", "on", "1", "checked"}
_FALSE = {"false", "no", "off", "0", ""}


class InvalidValues(ValueError):
    """The answer does not fit the request; ``words`` is the reason for the person who
    clicked (``str()``: in English)."""

    def __init__(self, words: Said) -> None:
        super().__init__(str(words))
        self.words = words


def quoted(label: str) -> str:
    return f"\u201c{label}\u201d"


def check_action(args: AskHumanToolArgs, action_id: str) -> AskHumanAction:
    """The chosen action, which must be one the request offers."""
    action = args.action(action_id)
    if action is None:
        offered = ", ".join(quoted(a.label) for a in args.actions)
        shown = action_id if len(action_id) <= 64 else action_id[:63] + "\u2026"
        raise InvalidValues(said("value.no_action", action=quoted(shown), offered=offered))
    return action


def _check_size(label: str, value: object) -> None:
    """Refuse values no person could have typed before looking at them any further.

    Iterative on purpose: a forged, deeply nested value must not hit the recursion limit.
    """
    stack: list[tuple[object, int]] = [(value, 1)]
    chars = items = 0
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InvalidValues(said("value.too_deep", label=quoted(label)))
        if isinstance(item, str):
            chars += len(item)
        elif isinstance(item, Mapping):
            items += len(item)
            chars += sum(len(k) if isinstance(k, str) else 0 for k in item)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list | tuple):
            items += len(item)
            stack.extend((v, depth + 1) for v in item)
        if chars > MAX_VALUE_CHARS or items > 10 * MAX_LIST_ITEMS:
            raise InvalidValues(said("value.too_large", label=quoted(label)))


def _is_empty(value: object) -> bool:
    return value is None or value == "" or value == []


def _text(field: ParagraphField, value: object) -> JsonValue:
    if not isinstance(value, str):
        raise InvalidValues(said("value.text", label=quoted(field.label)))
    if len(value) > MAX_TEXT_CHARS:
        raise InvalidValues(said("value.too_long", label=quoted(field.label),
                                 most=MAX_TEXT_CHARS))
    return value


def _select(field: SelectField, value: object) -> JsonValue:
    allowed = [o.value for o in field.options]
    if not isinstance(value, str) or value not in allowed:
        raise InvalidValues(said("value.one_of", label=quoted(field.label),
                                 values=", ".join(allowed)))
    return value


def _multi(field: MultiSelectField, value: object) -> JsonValue:
    allowed = [o.value for o in field.options]
    items = [value] if isinstance(value, str) else value
    most = max(MAX_LIST_ITEMS, len(allowed))
    if isinstance(items, list) and len(items) > most:
        raise InvalidValues(said("value.too_many_choices", label=quoted(field.label),
                                 most=most))
    if not isinstance(items, list) or any(
        not isinstance(v, str) or v not in allowed for v in items
    ):
        raise InvalidValues(said("value.only_contain", label=quoted(field.label),
                                 values=", ".join(allowed)))
    return list(dict.fromkeys(items))  # de-duplicated, order kept


def _parse_number(value: object) -> int | float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number: int | float = value
    elif isinstance(value, str):
        text = value.strip().replace("_", "")
        try:
            number = int(text)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                return None
    else:
        return None
    return number if math.isfinite(number) else None


def _number(field: NumberField, value: object) -> JsonValue:
    number = _parse_number(value)
    if number is None:
        raise InvalidValues(said("value.number", label=quoted(field.label)))
    if field.min_value is not None and number < field.min_value:
        raise InvalidValues(said("value.at_least", label=quoted(field.label),
                                 value=field.min_value))
    if field.max_value is not None and number > field.max_value:
        raise InvalidValues(said("value.at_most", label=quoted(field.label),
                                 value=field.max_value))
    return number


def _checkbox(field: CheckboxField, value: object) -> JsonValue:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise InvalidValues(said("value.checkbox", label=quoted(field.label)))


def _date(field: DateField, value: object) -> JsonValue:
    try:
        if not isinstance(value, str) or len(value.strip()) != 10:
            raise ValueError
        return dt.date.fromisoformat(value.strip()).isoformat()
    except ValueError:
        raise InvalidValues(said("value.date", label=quoted(field.label))) from None


def _one_file(label: str, item: object) -> dict[str, JsonValue]:
    if not isinstance(item, Mapping):
        raise InvalidValues(said("value.file_list", label=quoted(label)))
    unknown = sorted(set(item) - set(FILE_KEYS))
    if unknown or not all(isinstance(item.get(k), str) and item.get(k) for k in ("platform", "id")):
        raise InvalidValues(said("value.file_ref", label=quoted(label)))
    for key, most in _FILE_TEXT_LIMITS.items():
        text = item.get(key)
        if text is not None and (not isinstance(text, str) or len(text) > most):
            raise InvalidValues(said("value.file_invalid", label=quoted(label), key=key))
    size = item.get("size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise InvalidValues(said("value.file_size", label=quoted(label)))
    return {k: item.get(k) for k in FILE_KEYS}


def _files(field: FileField | FileListField, value: object) -> JsonValue:
    items = [value] if isinstance(value, Mapping) else value
    if not isinstance(items, list):
        raise InvalidValues(said("value.file_list", label=quoted(field.label)))
    limit = 1 if isinstance(field, FileField) else min(field.max_files or MAX_FILES,
                                                       MAX_FILES_HARD)
    if len(items) > limit:
        raise InvalidValues(said("value.too_many_files", label=quoted(field.label),
                                 most=limit))
    files: list[JsonValue] = [_one_file(field.label, item) for item in items]
    return files


_CHECKERS: dict[str, Callable[[Any, object], JsonValue]] = {
    "paragraph": _text,
    "select": _select,
    "multi-select": _multi,
    "number": _number,
    "checkbox": _checkbox,
    "date": _date,
    "file": _files,
    "file-list": _files,
}


def check_values(args: AskHumanToolArgs, values: Mapping[str, object]) -> dict[str, JsonValue]:
    """Normalized values (typed per field), or ``InvalidValues`` with the first problem.

    Empty optional fields are left out. A required checkbox must be checked.
    """
    fields = {f.name: f for f in args.fields}
    for name in values:
        if name not in fields:
            shown = name if len(name) <= 64 else name[:63] + "\u2026"
            raise InvalidValues(said("value.no_field", field=quoted(shown)))
    out: dict[str, JsonValue] = {}
    for name, field in fields.items():
        raw = values.get(name)
        _check_size(field.label, raw)
        if _is_empty(raw):
            if field.required:
                raise InvalidValues(said("value.required", label=quoted(field.label)))
            continue
        value = _CHECKERS[field.type](field, raw)
        if field.required and field.type == "checkbox" and value is False:
            raise InvalidValues(said("value.must_check", label=quoted(field.label)))
        out[name] = value
    return out


def check_answer(
    args: AskHumanToolArgs, action_id: str, values: Mapping[str, object]
) -> tuple[AskHumanAction, dict[str, JsonValue]]:
    """The action first (a stale button must not produce a field error), then values."""
    return check_action(args, action_id), check_values(args, values)
