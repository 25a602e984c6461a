"""Approve with edits: check what an approver typed, and replace the call under vote.

A tool-approval request whose tool has ``editable`` arguments offers "Edit and
approve" (``approve_edit``). A platform sends the typed values as the answer's
``edited`` value (argument name → value as typed); ``take_edit`` (called by the
``Decider`` and the click pre-check, before the answer's own fields are checked)
converts each one to its JSON Schema type and validates it with ``jsonschema``
against the schema stored with the request, so a bad value is refused where the
person typed it, naming the argument, and nothing is recorded. (``jsonschema``, some
3 MB with ``attrs`` and ``referencing``, is imported by the first edit checked.)

``apply_edit`` runs inside the decision's transaction (``Decider.decide``): the
request's ``tool`` view gets the edited arguments, the binding hash of the edited call
and an ``edit`` record (``before``, ``after``, ``by``); the audit row
``tool_call_edited`` holds both argument sets and both hashes. An edit replaces the
call under vote: earlier votes are deleted (``votes_cleared`` keeps them in the audit),
so on a quorum route the editor's vote is the first approval of the new call. The
original binding stays on the request: the runtime checks the pending call against
it, then runs it with the edited arguments (``resume_edit``).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue
from sqlalchemy import delete
from sqlalchemy.orm import Session

from bot.askhuman.schema import AskHumanToolResult
from bot.engine import store
from bot.engine.policy import APPROVALS
from bot.engine.ports import Identity
from bot.engine.values import InvalidValues, quoted
from bot.tools.binding import binding_hash
from bot.tools.edits import note_for
from renderers.card import RequestCard, ToolApprovalView
from renderers.tool_card import APPROVE_EDIT, STORED_VALUE_CHARS
from renderers.tool_edits import EDITED
from renderers.words import said
from storage import HumanRequest, Vote

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

CALL = "call"
"""``human_requests.tool`` key: the call exactly as hashed (``args``, ``fixed``)."""
AUDIT_ARGS_CHARS = 8000
"""Longest JSON of one argument set kept in the ``tool_call_edited`` audit row."""


class InvalidEdit(InvalidValues):
    """An edited value does not fit the tool's schema; ``argument`` names it."""

    def __init__(self, argument: str, words: Any) -> None:
        super().__init__(words)
        self.argument = argument


def take_edit(card: RequestCard, action_id: str, values: Mapping[str, Any]
              ) -> tuple[dict[str, Any], dict[str, JsonValue] | None]:
    """``(the other values, the checked edit)``: an ``approve_edit`` answer on a card
    with editable arguments loses its ``edited`` value to the checked edit (None when
    it changes nothing). Anything else is left alone, so ``check_answer`` refuses an
    ``edited`` value where none belongs."""
    view = card.tool
    if view is None or not view.editable:
        return dict(values), None
    rest = dict(values)
    raw = rest.pop(EDITED, None)
    if raw is None:
        return rest, None
    if not isinstance(raw, Mapping):
        raise InvalidValues(said("edit.unreadable"))
    if action_id != APPROVE_EDIT:
        _refuse_unsent_edit(card, view, action_id, raw)
        return rest, None
    checked = check_edit(view, raw)
    return rest, checked or None


def _refuse_unsent_edit(card: RequestCard, view: ToolApprovalView, action_id: str,
                        raw: Mapping[str, Any]) -> None:
    """A plain Approve from a form whose edit inputs were changed (a form that sends every
    input with any button) would run the call the person just changed: refuse it and
    point at "Edit and approve". Other choices (Reject) ignore the inputs."""
    if action_id not in APPROVALS:
        return
    try:
        changed = sorted(check_edit(view, raw))
    except InvalidEdit as exc:
        changed = [exc.argument]
    if changed:
        action = card.args.action(action_id)
        edit = card.args.action(APPROVE_EDIT)
        raise InvalidValues(said("edit.not_sent", names=", ".join(changed)[:200],
                                 label=quoted(action.label if action else action_id),
                                 edit=quoted(edit.label if edit else APPROVE_EDIT)))


def check_edit(view: ToolApprovalView, raw: Mapping[str, Any]) -> dict[str, JsonValue]:
    """Typed, schema-valid edited values that differ from the call's (``InvalidEdit``
    naming the first bad argument). An empty input leaves its argument unchanged."""
    properties = (view.schema.get("properties") or {}) if isinstance(view.schema, dict) else {}
    assert isinstance(properties, dict)
    current = {a.name: a.value for a in view.args if not a.fixed}
    typed: dict[str, JsonValue] = {}
    for name, value in raw.items():
        if name not in view.editable:
            raise InvalidEdit(str(name), said("edit.not_editable", label=quoted(str(name)[:64])))
        if value is None or value == "":
            continue
        prop = properties.get(name)
        typed[name] = _coerce(name, prop if isinstance(prop, dict) else {}, value)
    from jsonschema import Draft202012Validator

    schema = {**view.schema, "required": []}
    errors = sorted(Draft202012Validator(schema).iter_errors(typed),
                    key=lambda e: list(e.absolute_path))
    if errors:
        raise _invalid(errors[0])
    return {k: v for k, v in typed.items() if current.get(k) != v}


def _types(prop: Mapping[str, Any]) -> list[str]:
    """The JSON types a property allows (``anyOf``/``type`` lists; null left out)."""
    kinds = prop.get("type")
    found = [kinds] if isinstance(kinds, str) else list(kinds or [])
    for option in prop.get("anyOf") or prop.get("oneOf") or []:
        if isinstance(option, dict):
            found += _types(option)
    return [k for k in found if k != "null"]


def _coerce(name: str, prop: Mapping[str, Any], value: Any) -> JsonValue:
    """A typed value from what an input sent (text for numbers, JSON for objects)."""
    label = quoted(name[:64])
    if not isinstance(value, str):
        return value  # type: ignore[no-any-return]  # already typed (a checkbox, the API)
    text = value.strip()
    enum = prop.get("enum")
    if isinstance(enum, list):
        for option in enum:
            if text == (option if isinstance(option, str) else json.dumps(option)):
                return option  # type: ignore[no-any-return]
        return value
    kinds = _types(prop)
    if "integer" in kinds or "number" in kinds:
        number = _number(text)
        if number is None:
            raise InvalidEdit(name, said("value.number", label=label))
        return number
    if kinds == ["boolean"]:
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise InvalidEdit(name, said("value.checkbox", label=label))
    if "string" in kinds or not kinds:
        return value
    try:
        return json.loads(text)  # type: ignore[no-any-return]
    except ValueError:
        raise InvalidEdit(name, said("edit.json", label=label)) from None


def _number(text: str) -> int | float | None:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return None
    if not math.isfinite(number):
        return None
    return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() \
        else number


def _invalid(error: ValidationError) -> InvalidEdit:
    """A ``jsonschema`` error → the refusal people read, in their language."""
    path = list(error.absolute_path)
    name = str(path[0]) if path else "?"
    label = quoted(name[:64])
    kind, limit = error.validator, error.validator_value
    if kind in ("minimum", "exclusiveMinimum"):
        return InvalidEdit(name, said("value.at_least", label=label, value=limit))
    if kind in ("maximum", "exclusiveMaximum"):
        return InvalidEdit(name, said("value.at_most", label=label, value=limit))
    if kind == "enum":
        shown = ", ".join(o if isinstance(o, str) else json.dumps(o) for o in limit)
        return InvalidEdit(name, said("value.one_of", label=label, values=shown))
    if kind == "maxLength":
        return InvalidEdit(name, said("value.too_long", label=label, most=limit))
    if kind == "minLength":
        return InvalidEdit(name, said("edit.min_length", label=label, least=limit))
    if kind == "type":
        shown = limit if isinstance(limit, str) else " / ".join(map(str, limit))
        return InvalidEdit(name, said("edit.type", label=label, type=shown))
    return InvalidEdit(name, said("edit.invalid", label=label, reason=error.message[:300]))


# ---------------------------------------------------------------- the decision


def edited_values(result: AskHumanToolResult) -> dict[str, JsonValue] | None:
    """The checked edit an answer carries (``take_edit`` put it there), if any."""
    if result.action is None or result.action.id != APPROVE_EDIT:
        return None
    edited = result.values.get(EDITED)
    return dict(edited) if isinstance(edited, dict) and edited else None


def apply_edit(
    session: Session, now: dt.datetime, request: HumanRequest, who: Identity,
    result: AskHumanToolResult, votes: Sequence[Vote],
) -> Sequence[Vote]:
    """Replace the call under vote with the edited one (in the decision's transaction);
    returns the votes that still count (none after an edit)."""
    changes = edited_values(result)
    tool = dict(request.tool or {})
    call = tool.get(CALL)
    if changes is None or not isinstance(call, dict):
        return votes
    found = tool.get("edit")
    edit: dict[str, Any] = found if isinstance(found, dict) else {}
    original, fixed = dict(call.get("args") or {}), dict(call.get("fixed") or {})
    before_args = {**original, **(edit.get("after") or {})}
    after = {**(edit.get("after") or {}), **changes}
    after_args = {**original, **after}
    before_binding = str(tool.get("binding") or request.binding or "")
    after_binding = binding_hash(str(tool.get("tool") or ""), after_args, fixed)
    tool["args"] = [_with_value(a, after) for a in tool.get("args") or []]
    tool["binding"] = after_binding
    tool["edit"] = {"before": {k: original.get(k) for k in after}, "after": after,
                    "by": who.display_name or who.user_id, "binding": after_binding,
                    "at": now.isoformat()}
    request.tool = tool
    store.audit(session, now, "tool_call_edited", run_id=request.run_id, ref=request.ref,
                actor=who, details={
                    "tool": tool.get("tool"), "changed": sorted(changes),
                    "args_before": _capped(before_args), "args_after": _capped(after_args),
                    "binding_before": before_binding, "binding_after": after_binding})
    if votes:
        store.audit(session, now, "votes_cleared", run_id=request.run_id, ref=request.ref,
                    actor=who, details={"because": "tool_call_edited", "votes": [
                        {"person": v.person, "action_id": v.action_id,
                         "by": v.display_name or v.user_id} for v in votes]})
        session.execute(delete(Vote).where(Vote.request_id == request.id))
    return []


def edited_since(request: HumanRequest, received: dt.datetime, action_id: str) -> bool:
    """Whether an approval clicked at ``received`` came before the call was edited: it
    approved a call that is no longer the one under vote. (A rejection still counts.)"""
    edit = (request.tool or {}).get("edit") if request.kind == "tool_approval" else None
    at = edit.get("at") if isinstance(edit, dict) else None
    if not isinstance(at, str) or action_id not in APPROVALS:
        return False
    try:
        edited = dt.datetime.fromisoformat(at)
    except ValueError:
        return False
    if edited.tzinfo is None:
        edited = edited.replace(tzinfo=dt.UTC)
    if received.tzinfo is None:
        received = received.replace(tzinfo=dt.UTC)
    return received < edited


def _with_value(arg: Any, after: Mapping[str, Any]) -> Any:
    if not isinstance(arg, dict) or arg.get("fixed") or arg.get("name") not in after:
        return arg
    value = after[arg["name"]]
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) > STORED_VALUE_CHARS:
        return {**arg, "value": text[:STORED_VALUE_CHARS], "size": len(text)}
    return {**arg, "value": value, "size": None}


def _capped(args: Mapping[str, Any]) -> Any:
    """The argument set as is, or its JSON text cut (an audit row stays bounded)."""
    text = json.dumps(args, ensure_ascii=False, sort_keys=True, default=str)
    return dict(args) if len(text) <= AUDIT_ARGS_CHARS else text[:AUDIT_ARGS_CHARS] + "…"


# ---------------------------------------------------------------- the resume


def resume_edit(tool: Mapping[str, Any] | None) -> tuple[dict[str, Any] | None, str | None]:
    """``(edited arguments, note for the model)`` of a request's tool view (None, None
    when nobody edited the call)."""
    edit = (tool or {}).get("edit")
    if not isinstance(edit, dict) or not isinstance(edit.get("after"), dict):
        return None, None
    found = edit.get("before")
    before: dict[str, Any] = found if isinstance(found, dict) else {}
    after = dict(edit["after"])
    return after, note_for(before, after, str(edit.get("by") or ""))


def edited_input(tool: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The whole edited input of an edited call (for the API's ``updated_input``)."""
    after, _ = resume_edit(tool)
    call = (tool or {}).get(CALL)
    if after is None or not isinstance(call, dict):
        return None
    return {**dict(call.get("args") or {}), **after}


_JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
               (list, "array"), (dict, "object"))


def inferred_schema(args: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON Schema typing each argument as its value is typed (an API caller that
    sent no ``input_schema``): an edit must keep each editable argument's type."""
    properties: dict[str, Any] = {}
    for name, value in args.items():
        kind = next((k for t, k in _JSON_TYPES if isinstance(value, t)), None)
        properties[name] = {"type": kind} if kind else {}
    return {"type": "object", "properties": properties}
