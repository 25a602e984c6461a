"""The Feishu ``delegate`` bot command: ``delegate @Bob until 2026-12-24`` (also
``/delegate``), ``delegate revoke [@Bob]`` and ``delegate list``, sent to the bot in a
direct chat or with an @-mention in a group.

The person is an @-mention (its open_id comes with the message), an ``ou_…`` open_id
or an email (looked up through the directory).
"""

from __future__ import annotations

import re
from typing import Any

from bot.engine import delegation_chat
from bot.engine.ports import DirectoryUnavailable, Identity
from bot.platforms.feishu.engine_api import EngineApi
from bot.platforms.feishu.message import Incoming
from renderers.words import said

PLATFORM = "feishu"
_COMMAND = re.compile(r"^/?delegate(?:\s+(.*))?$", re.IGNORECASE | re.DOTALL)
_OPEN_ID = re.compile(r"^ou_[A-Za-z0-9_-]{4,80}$")


def delegate_rest(text: str) -> str | None:
    """The words after ``delegate`` (None: not this command)."""
    match = _COMMAND.match(text.strip())
    return (match.group(1) or "").strip() if match else None


def mention_ids(message: Any) -> dict[str, str]:
    """``@name`` → open_id of the people an ``im.message.receive_v1`` message mentions."""
    found: dict[str, str] = {}
    for mention in getattr(message, "mentions", None) or []:
        name = getattr(mention, "name", None)
        open_id = getattr(getattr(mention, "id", None), "open_id", None)
        if name and isinstance(open_id, str):
            found[f"@{name}"] = open_id
    return found


async def resolve(engine: EngineApi, msg: Incoming, token: str | None) -> Identity | None:
    if not token:
        return None
    if token in msg.mention_ids:
        return Identity(PLATFORM, msg.mention_ids[token], token.removeprefix("@"))
    if _OPEN_ID.match(token):
        return Identity(PLATFORM, token)
    directory = engine.directory(PLATFORM)
    if "@" in token[1:] and directory is not None:
        try:
            found = [u for u in await directory.resolve_users([token]) if _OPEN_ID.match(u)]
        except DirectoryUnavailable:
            return None
        return Identity(PLATFORM, found[0], token) if found else None
    return None


async def delegate_command(engine: EngineApi, msg: Incoming, rest: str,
                           locale: str | None = None) -> str:
    """The reply to a ``delegate`` command (plain text, in ``locale``)."""
    names = {}
    for name, open_id in sorted(msg.mention_ids.items(), key=lambda kv: -len(kv[0])):
        if name in rest:  # "@Bob Smith" is one person: make it one token
            rest, names[open_id] = rest.replace(name, open_id), name.removeprefix("@")
    command = delegation_chat.parse_chat(rest)
    target = await resolve(engine, msg, command.target)
    if target is not None and target.user_id in names:
        target = Identity(PLATFORM, target.user_id, names[target.user_id])
    if command.target and target is None and command.verb in ("add", "revoke"):
        return said("delegation.who_unknown_feishu", who=command.target[:60]).text(locale)
    words = await engine.delegations.run_chat(msg.sender, command, target)
    return words.text(locale).replace("`", "")
