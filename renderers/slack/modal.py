"""The modal a file button opens, and reading its ``private_metadata`` back."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bot.askhuman.schema import FILE_FIELD_TYPES, AskHumanField
from renderers import i18n
from renderers.card import MAX_REF_CHARS, RequestCard
from renderers.markdown import check_slack
from renderers.slack.ids import INPUT_ACTION_ID, block_id
from renderers.slack.kit import Block, plain_text, section

FILE_MODAL_CALLBACK_ID = "askhuman_files"


@dataclass(frozen=True)
class ModalContext:
    """What a file modal's ``private_metadata`` carries back to the adapter."""

    ref: str
    channel: str
    ts: str
    field_name: str | None = None
    action_id: str | None = None


@i18n.localized
def file_modal(
    card: RequestCard,
    channel: str,
    ts: str,
    field_name: str | None = None,
    action_id: str | None = None,
) -> dict[str, Any]:
    """The modal a file button opens (``file_input`` is modal-only in Slack).

    It shows ``field_name`` or, when None, every file field of the request.
    ``private_metadata`` carries ref, channel and ts, because a view_submission has
    no container to find the original message by.
    """
    fields = [
        f for f in card.args.fields
        if f.type in FILE_FIELD_TYPES and (field_name is None or f.name == field_name)
    ]
    blocks = [_file_input(card, f) for f in fields[:100]]
    if not blocks:
        blocks = [section(i18n.t("no_file_fields"))]
    view = {
        "type": "modal",
        "callback_id": FILE_MODAL_CALLBACK_ID,
        "title": plain_text(i18n.t("attach_files"), 24),
        "submit": plain_text(i18n.t("upload"), 24),
        "close": plain_text(i18n.t("cancel"), 24),
        "private_metadata": _metadata(card.ref, channel, ts, field_name, action_id),
        "blocks": blocks,
    }
    check_slack(view)
    return view


def _file_input(card: RequestCard, field: AskHumanField) -> Block:
    most = getattr(field, "max_files", None) or (1 if field.type == "file" else 10)
    return {
        "type": "input",
        "block_id": block_id(card.version, card.args, field),
        "label": plain_text(field.label, 2000),
        "optional": not field.required,
        "element": {"type": "file_input", "action_id": INPUT_ACTION_ID, "max_files": min(most, 10)},
    }


def modal_metadata(ref: str, channel: str, ts: str, action: str | None = None) -> str:
    """``private_metadata`` of one of our modals (ref, channel, ts; optional action)."""
    return _metadata(ref, channel, ts, None, action)


def _metadata(ref: str, channel: str, ts: str, field: str | None, action: str | None) -> str:
    data = {"r": ref, "c": channel, "t": ts}
    if field is not None:
        data["f"] = field
    if action is not None:
        data["a"] = action
    text = json.dumps(data, separators=(",", ":"))
    if len(text) > 3000:
        raise ValueError("private_metadata would exceed Slack's 3000 characters")
    return text


def parse_private_metadata(text: object) -> ModalContext | None:
    """The inverse of the modal's ``private_metadata``; None if it is not ours."""
    if not isinstance(text, str) or len(text) > 3000:  # Slack's own cap: longer is forged
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    ref, channel, ts = data.get("r"), data.get("c"), data.get("t")
    field, action = data.get("f"), data.get("a")
    if not all(isinstance(v, str) and v for v in (ref, channel, ts)):
        return None
    if len(str(ref)) > MAX_REF_CHARS:
        return None
    if not all(v is None or isinstance(v, str) for v in (field, action)):
        return None
    return ModalContext(str(ref), str(channel), str(ts), field, action)
