"""The "Edit and approve" modal: the editable arguments as typed inputs, and a reason.

The card's ``approve_edit`` button carries ``ahe:{ref}`` so its own listener opens
this modal (``views.open`` with the click's ``trigger_id``). Each editable argument
is one input block ``edit_<index>`` built from its JSON Schema and prefilled with
the call's value (``renderers.tool_edits``): number → ``number_input`` (with the
schema's bounds), ``enum`` → ``static_select``, boolean → ``checkboxes``, string →
``plain_text_input`` (multi-line when long), anything else → JSON text. The reason
block uses the card's own block id, so ``read_values`` reads it like a card's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import JsonValue

from bot.askhuman.schema import AskHumanField, CheckboxField, NumberField, SelectField
from renderers import i18n
from renderers.card import RequestCard, option_token
from renderers.markdown import check_slack, slack_escape, truncate
from renderers.slack.ids import ID_CHARS, INPUT_ACTION_ID, block_id
from renderers.slack.kit import Block, plain_text, section
from renderers.slack.modal import modal_metadata
from renderers.slack.values import read_input
from renderers.tool_card import APPROVE_EDIT, REASON_FIELD
from renderers.tool_edits import LONG_TEXT, edit_fields, named_edits

EDIT_MODAL_CALLBACK_ID = "askhuman_edit"
EDIT_ACTION_PREFIX = "ahe:"
EDIT_ACTION_ID_PATTERN = re.compile(r"^ahe:")


def edit_action_id(ref: str) -> str:
    return f"{EDIT_ACTION_PREFIX}{ref}"[:ID_CHARS]


def parse_edit_action_id(action_id: object) -> str | None:
    if not isinstance(action_id, str) or not action_id.startswith(EDIT_ACTION_PREFIX):
        return None
    ref = action_id[len(EDIT_ACTION_PREFIX):]
    return ref or None


@i18n.localized
def edit_modal(card: RequestCard, channel: str, ts: str) -> dict[str, Any]:
    """The modal for ``card`` (a pending tool card with editable arguments)."""
    view = card.tool
    assert view is not None
    blocks: list[Block] = [section(slack_escape(i18n.t("edit.intro", tool=truncate(view.tool,
                                                                                     100))))]
    blocks += [_input(field) for field in edit_fields(view)]
    reason = next((f for f in card.args.fields if f.name == REASON_FIELD), None)
    if reason is not None:
        blocks.append({"type": "input", "block_id": block_id(card.version, card.args, reason),
                       "label": plain_text(reason.label, 2000), "optional": True,
                       "element": {"type": "plain_text_input", "action_id": INPUT_ACTION_ID,
                                   "multiline": True}})
    modal = {
        "type": "modal",
        "callback_id": EDIT_MODAL_CALLBACK_ID,
        "title": plain_text(i18n.t("edit.title"), 24),
        "submit": plain_text(i18n.t("edit.submit"), 24),
        "close": plain_text(i18n.t("cancel"), 24),
        "private_metadata": modal_metadata(card.ref, channel, ts, APPROVE_EDIT),
        "blocks": blocks,
    }
    check_slack(modal)
    return modal


def _input(field: AskHumanField) -> Block:
    return {"type": "input", "block_id": field.name, "optional": True,
            "label": plain_text(field.label, 2000), "element": _element(field)}


def _element(field: AskHumanField) -> dict[str, Any]:
    el: dict[str, Any] = {"action_id": INPUT_ACTION_ID}
    default = getattr(field, "default", None)
    if isinstance(field, NumberField):
        whole = not isinstance(default, float) and not any(
            isinstance(b, float) for b in (field.min_value, field.max_value))
        el.update(type="number_input", is_decimal_allowed=not whole)
        if default is not None:
            el["initial_value"] = str(default)
        if field.min_value is not None:
            el["min_value"] = str(field.min_value)
        if field.max_value is not None:
            el["max_value"] = str(field.max_value)
    elif isinstance(field, SelectField):
        options = [{"text": plain_text(o.label, 75), "value": option_token(i)}
                   for i, o in enumerate(field.options)]
        el.update(type="static_select", options=options)
        chosen = [o for o, f in zip(options, field.options, strict=True)
                  if f.value == field.default]
        if chosen:
            el["initial_option"] = chosen[0]
    elif isinstance(field, CheckboxField):
        box = {"text": plain_text(field.label, 75), "value": "true"}
        el.update(type="checkboxes", options=[box])
        if field.default:
            el["initial_options"] = [box]
    else:
        text = default if isinstance(default, str) else ""
        el.update(type="plain_text_input", multiline=len(text) > LONG_TEXT or "\n" in text)
        if text:
            el["initial_value"] = text[:3000]
    return el


def read_edit_state(state_values: Mapping[str, Any], card: RequestCard) -> dict[str, JsonValue]:
    """The modal's ``view.state.values`` → ``{argument: typed}`` (the engine checks them).
    An unticked checkbox reads as ``False``; an empty input leaves its argument as is."""
    if card.tool is None or not card.tool.editable:
        return {}
    values: dict[str, JsonValue] = {}
    for field in edit_fields(card.tool):
        if field.name not in state_values:
            continue
        value = read_input(field, state_values[field.name])
        if value is not None:
            values[field.name] = value
    return named_edits(card.tool, values)


def edit_block_id(card: RequestCard, argument: str) -> str | None:
    """The input block of ``argument`` (where an inline error goes)."""
    if card.tool is None or argument not in card.tool.editable:
        return None
    return edit_fields(card.tool)[card.tool.editable.index(argument)].name
