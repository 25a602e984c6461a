"""Small text helpers for system messages we write ourselves (not request cards).

Agent output and prompts are untrusted: escaping ``& < >`` disarms every Slack
control sequence (``<!here>``, ``<@U…>``, links), which is all mrkdwn needs.
"""

from __future__ import annotations

import re

MAX_TEXT = 3900
"""Keep posted text well under Slack's 4000-char comfort limit for one message."""

_MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>")


def escape(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` (in that order) so Slack shows text literally."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def truncate(text: str, limit: int = MAX_TEXT) -> str:
    """Cut ``text`` to ``limit`` characters, saying that it was cut."""
    if len(text) <= limit:
        return text
    return text[: limit - 20].rstrip() + "\n… (truncated)"


def strip_mentions(text: str) -> str:
    """Remove user mentions (``<@U123>``) from an app_mention's text."""
    return _MENTION.sub("", text).strip()


def quote(text: str) -> str:
    """Render untrusted text as an escaped mrkdwn block quote."""
    return "\n".join("> " + line for line in escape(text).splitlines() or [""])
