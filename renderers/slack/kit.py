"""Block Kit text objects, sections and context lines, shared by the message, the modals,
App Home and the lists."""

from __future__ import annotations

from typing import Any

from renderers.markdown import plain, truncate

Block = dict[str, Any]

SECTION_CHARS = 3000
CONTEXT_CHARS = 2000


def plain_text(text: str, limit: int) -> dict[str, Any]:
    return {"type": "plain_text", "text": plain(text, limit) or "…", "emoji": True}


def mrkdwn(text: str) -> dict[str, Any]:
    """``text`` must already be escaped; verbatim stops Slack auto-parsing mentions."""
    return {"type": "mrkdwn", "text": text or " ", "verbatim": True}


def section(text: str) -> Block:
    return {"type": "section", "text": mrkdwn(truncate(text, SECTION_CHARS))}


def context(text: str) -> Block:
    """A small grey line; ``text`` must already be escaped (verbatim, like ``mrkdwn``)."""
    return {"type": "context", "elements": [mrkdwn(truncate(text, CONTEXT_CHARS))]}
