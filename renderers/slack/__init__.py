"""RequestCard → Slack Block Kit, and Slack payloads → contract values.

The public surface the Slack adapter, ``renderers.home`` and the tests import;
each name lives in the module of the package that does its job.
"""

from __future__ import annotations

from renderers.slack.ids import (
    ACTION_ID_PATTERN,
    ACTION_PREFIX,
    FILE_ACTION_ID_PATTERN,
    FILE_ACTION_PREFIX,
    ID_CHARS,
    INPUT_ACTION_ID,
    WITHDRAW_ACTION_ID_PATTERN,
    WITHDRAW_PREFIX,
    action_id_for,
    block_id,
    parse_action_id,
    parse_file_action_id,
    parse_withdraw_action_id,
    resolve_action,
)
from renderers.slack.kit import SECTION_CHARS, Block
from renderers.slack.message import (
    FILE_MODAL_CALLBACK_ID,
    MAX_BLOCKS,
    TOTAL_TEXT_CHARS,
    ModalContext,
    file_modal,
    parse_private_metadata,
    read_values,
    render_request,
    total_text_chars,
)

__all__ = [
    "ACTION_ID_PATTERN",
    "ACTION_PREFIX",
    "FILE_ACTION_ID_PATTERN",
    "FILE_ACTION_PREFIX",
    "FILE_MODAL_CALLBACK_ID",
    "ID_CHARS",
    "INPUT_ACTION_ID",
    "MAX_BLOCKS",
    "SECTION_CHARS",
    "TOTAL_TEXT_CHARS",
    "WITHDRAW_ACTION_ID_PATTERN",
    "WITHDRAW_PREFIX",
    "Block",
    "ModalContext",
    "action_id_for",
    "block_id",
    "file_modal",
    "parse_action_id",
    "parse_file_action_id",
    "parse_private_metadata",
    "parse_withdraw_action_id",
    "read_values",
    "render_request",
    "resolve_action",
    "total_text_chars",
]
