"""RequestCard → Slack Block Kit, and Slack payloads → contract values.

This package's ``__init__`` is the surface the Slack adapter and the tests import;
each name lives in the module that does its job:

* ``message``: the request card as a Block Kit message, for every status;
* ``modal``: the modal a file button opens, and its ``private_metadata`` read back;
* ``values``: message and modal ``state.values`` read back as contract values;
* ``ids``: the identifier scheme the blocks carry (made and parsed only there);
* ``kit``: the Block Kit text objects ``message`` and ``modal`` share.
"""

from __future__ import annotations

from renderers.slack.edit_modal import (
    EDIT_ACTION_ID_PATTERN,
    EDIT_MODAL_CALLBACK_ID,
    edit_block_id,
    edit_modal,
    parse_edit_action_id,
    read_edit_state,
)
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
from renderers.slack.message import MAX_BLOCKS, TOTAL_TEXT_CHARS, render_request, total_text_chars
from renderers.slack.modal import (
    FILE_MODAL_CALLBACK_ID,
    ModalContext,
    file_modal,
    parse_private_metadata,
)
from renderers.slack.values import read_values

__all__ = [
    "ACTION_ID_PATTERN",
    "ACTION_PREFIX",
    "EDIT_ACTION_ID_PATTERN",
    "EDIT_MODAL_CALLBACK_ID",
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
    "edit_block_id",
    "edit_modal",
    "file_modal",
    "parse_action_id",
    "parse_edit_action_id",
    "parse_file_action_id",
    "parse_private_metadata",
    "parse_withdraw_action_id",
    "read_edit_state",
    "read_values",
    "render_request",
    "resolve_action",
    "total_text_chars",
]
