"""The parts of a Feishu message (``im.message.receive_v1``) askhuman reads.

A leaf module: the message listeners and the ``delegate`` command both use
``Incoming``, and neither imports the other through it.
"""

from __future__ import annotations

import json
import mimetypes
from dataclasses import dataclass, field
from typing import Any

from bot.engine.ports import Identity

PLATFORM = "feishu"


@dataclass(frozen=True)
class Incoming:
    """The parts of ``im.message.receive_v1`` askhuman uses."""

    message_id: str
    chat_id: str
    chat_type: str
    message_type: str
    content: str
    parent_id: str | None
    root_id: str | None
    mentions: list[tuple[str, str]]
    sender: Identity
    mention_ids: dict[str, str] = field(default_factory=dict)
    """``@name`` → open_id of each person mentioned (``delegate @Bob …``)."""


def _content(msg: Incoming) -> dict[str, Any]:
    try:
        data = json.loads(msg.content)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def message_text(msg: Incoming) -> str | None:
    """The message text with leading @-mentions removed and the others as ``@name``."""
    text = _content(msg).get("text")
    if not isinstance(text, str):
        return None
    text = text.strip()
    names = dict(msg.mentions)
    while True:  # strip leading mentions (the bot's, and any before the command)
        for key in names:
            if text.startswith(key):
                text = text[len(key) :].lstrip()
                break
        else:
            break
    for key, name in names.items():
        text = text.replace(key, f"@{name}")
    return text


def file_reference(msg: Incoming) -> dict[str, Any] | None:
    """A contract file reference (``{platform, id, name, mimetype, size, url}``)."""
    data = _content(msg)
    key = data.get("file_key") or data.get("image_key")
    if not isinstance(key, str) or not key:
        return None
    name = data.get("file_name")
    if not isinstance(name, str) or not name:
        name = f"{key}.png" if msg.message_type == "image" else key
    mimetype = mimetypes.guess_type(name)[0] or (
        "image/png" if msg.message_type == "image" else "application/octet-stream"
    )
    return {
        "platform": PLATFORM,
        "id": key,
        "name": name[:255],
        "mimetype": mimetype,
        "size": None,
        "url": None,
    }
