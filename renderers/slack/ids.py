"""The identifiers a Slack card carries, and reading them back from a payload.

Identifier scheme (this module is the only place that knows it):

* input ``block_id`` = ``v{version}:{field name}`` (``v{version}:#{index}`` if the
  name would not fit in 255 chars); the element's ``action_id`` is ``in``. A new
  version gives new block ids, so Slack clients drop stale typed input.
* button ``action_id`` and ``value`` = ``ah:{ref}:{action id}``; a file button is
  ``ahf:{ref}:{field name}``. Only the opaque reference and an id travel, never args.
* the "Withdraw" overflow menu's ``action_id`` = ``ahw:{ref}``.
* option values are ``o{index}`` (see ``renderers.card.option_token``).
"""

from __future__ import annotations

import re

from bot.askhuman.schema import AskHumanAction, AskHumanField, AskHumanToolArgs
from renderers.card import MAX_REF_CHARS, index_token

ID_CHARS = 255
INPUT_ACTION_ID = "in"
ACTION_PREFIX = "ah:"
FILE_ACTION_PREFIX = "ahf:"
WITHDRAW_PREFIX = "ahw:"
ACTION_ID_PATTERN = re.compile(r"^ah:")
FILE_ACTION_ID_PATTERN = re.compile(r"^ahf:")
WITHDRAW_ACTION_ID_PATTERN = re.compile(r"^ahw:")
_BLOCK_ID = re.compile(r"^v([0-9]{1,9}):(.+)$", re.ASCII)


def block_id(version: int, args: AskHumanToolArgs, field: AskHumanField) -> str:
    """The input block id of ``field`` in message version ``version``."""
    bid = f"v{version}:{field.name}"
    return bid if len(bid) <= ID_CHARS else f"v{version}:#{args.fields.index(field)}"


def action_id_for(ref: str, args: AskHumanToolArgs, action: AskHumanAction) -> str:
    """Button action_id (and value): the request reference and the action id only."""
    aid = f"{ACTION_PREFIX}{ref}:{action.id}"
    return aid if len(aid) <= ID_CHARS else f"{ACTION_PREFIX}{ref}:#{args.actions.index(action)}"


def file_action_id(ref: str, args: AskHumanToolArgs, field: AskHumanField) -> str:
    """A file button's action_id (and value): the request reference and the field name."""
    aid = f"{FILE_ACTION_PREFIX}{ref}:{field.name}"
    return aid if len(aid) <= ID_CHARS else f"{FILE_ACTION_PREFIX}{ref}:#{args.fields.index(field)}"


def withdraw_action_id(ref: str) -> str:
    """The "Withdraw" overflow menu's action_id: the request reference only."""
    return f"{WITHDRAW_PREFIX}{ref}"


def _split_id(text: object, prefix: str) -> tuple[str, str] | None:
    if not isinstance(text, str) or not text.startswith(prefix):
        return None
    if len(text) > ID_CHARS:  # Slack caps action ids at 255; longer ones are forged
        return None
    ref, sep, token = text[len(prefix):].rpartition(":")
    return (ref, token) if sep and ref and token and len(ref) <= MAX_REF_CHARS else None


def parse_action_id(action_id: object) -> tuple[str, str] | None:
    """``(ref, action id)`` from a button's action_id or value, or None if not ours.

    The action id may be ``#index`` for absurdly long ids; ``resolve_action`` maps it.
    """
    return _split_id(action_id, ACTION_PREFIX)


def parse_file_action_id(action_id: object) -> tuple[str, str] | None:
    """``(ref, field name)`` from a file button's action_id, or None if not ours."""
    return _split_id(action_id, FILE_ACTION_PREFIX)


def resolve_action(args: AskHumanToolArgs, token: str) -> AskHumanAction | None:
    """The action a parsed token names (an id, or ``#index``)."""
    index = index_token(token, "#")
    if index is not None:
        return args.actions[index] if index < len(args.actions) else None
    return args.action(token)


def parse_withdraw_action_id(action_id: object) -> str | None:
    """The ref of a "Withdraw" menu's ``action_id``, or None if it is not ours."""
    if not isinstance(action_id, str) or not action_id.startswith(WITHDRAW_PREFIX):
        return None
    ref = action_id[len(WITHDRAW_PREFIX):]
    return ref if 0 < len(ref) <= MAX_REF_CHARS and ":" not in ref else None


def field_for_block(args: AskHumanToolArgs, bid: str) -> tuple[int, AskHumanField] | None:
    """``(version, field)`` an input ``block_id`` names, or None if it is not ours."""
    match = _BLOCK_ID.match(bid)
    if not match:
        return None
    key = match.group(2)
    index = index_token(key, "#")
    if index is not None:
        field = args.fields[index] if index < len(args.fields) else None
    else:
        field = next((f for f in args.fields if f.name == key), None)
    return None if field is None else (int(match.group(1)), field)
