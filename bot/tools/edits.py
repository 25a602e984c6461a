"""Approve with edits, on the tool side: what a card needs, and what the model is told.

An admin marks some arguments of a tool ``editable``. When such a call asks for
approval, the guard adds the editable names and the JSON Schema of just those
arguments to the approval metadata (``editable_metadata``), so every door can build
typed inputs and the engine can validate what an approver typed. When an approver
changed them, the resume runs the call with ``ToolApproved(override_args=…)``;
pydantic-ai then validates and runs the edited call but shows the model only the
tool's return, so ``with_note`` adds one line saying which arguments were changed,
or the model would believe its own arguments ran.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

EDIT_NOTE = "edit_note"
"""Approval metadata key: the note the model reads after the edited call's return."""
NOTE_VALUE_CHARS = 200


def editable_schema(names: Sequence[str], schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """The JSON Schema of the editable arguments only (their ``required`` and ``$defs``
    kept), so the engine validates an edit exactly as the tool would."""
    whole = dict(schema or {})
    properties = whole.get("properties") or {}
    out: dict[str, Any] = {
        "type": "object",
        "properties": {name: properties.get(name, {}) for name in names},
        "required": [n for n in whole.get("required") or [] if n in names],
        "additionalProperties": False,
    }
    if whole.get("$defs"):
        out["$defs"] = whole["$defs"]
    return out


def editable_metadata(names: Sequence[str], schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """``{"editable": [...], "schema": {...}}`` for the approval metadata ({} if none)."""
    if not names:
        return {}
    return {"editable": list(names), "schema": editable_schema(names, schema)}


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                            default=str)
    return text if len(text) <= NOTE_VALUE_CHARS else text[:NOTE_VALUE_CHARS] + "…"


def diff_text(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """``replicas 10 → 5, message "a" → "b"`` (only the arguments that changed)."""
    return ", ".join(f"{name} {_shown(before.get(name))} → {_shown(value)}"
                     for name, value in after.items() if before.get(name) != value)


def note_for(before: Mapping[str, Any], after: Mapping[str, Any], by: str) -> str:
    """What the model reads after an edited call's return."""
    who = f" ({by})" if by else ""
    return ("Note: a reviewer edited the arguments before approving" + who + ": "
            + diff_text(before, after) + ". The call ran with the edited arguments.")


def with_note(result: Any, note: object) -> Any:
    """``result`` with the edit note appended (unchanged when there is no note)."""
    if not isinstance(note, str) or not note:
        return result
    if isinstance(result, str):
        return f"{result}\n\n{note}"
    try:
        text = json.dumps(result, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = str(result)
    return f"{text}\n\n{note}"
