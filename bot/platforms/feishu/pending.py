"""Feishu ``/pending``: the open requests the asker may answer, as a reply."""

from __future__ import annotations

import re

from bot.engine.results import PendingPage
from renderers.text import format_when, summary

PENDING_PER_PAGE = 10
_PENDING = re.compile(r"^\s*/?pending(?:\s+(\d{1,6}))?\s*$", re.IGNORECASE)


def pending_command(text: str) -> int | None:
    """``/pending`` or ``/pending 2`` → the page wanted; None for anything else."""
    match = _PENDING.match(text)
    if match is None:
        return None
    return int(match.group(1)) if match.group(1) else 1


def pending_reply(page: PendingPage) -> str:
    """One page as plain text (card text is model-written: the reply is sent as plain
    text, which Feishu never parses for mentions or links)."""
    if not page.total:
        return "Nothing is waiting for you."
    lines = [f"{page.total} open request(s) you may answer:"]
    for number, card in enumerate(page.cards, page.first):
        due = f", due {format_when(card.deadline)}" if card.deadline else ""
        lines.append(f"{number}. {summary(card, 150)} (agent {card.agent_name}{due})")
    if page.page < page.pages:
        lines.append(f"Page {page.page} of {page.pages}: send /pending {page.page + 1} for "
                     "more.")
    return "\n".join(lines)
