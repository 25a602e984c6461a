"""Feishu ``/pending``: the open requests the asker may answer, as a reply."""

from __future__ import annotations

import dataclasses
import re

from bot.engine.results import PendingPage
from renderers import i18n
from renderers.batch import MAX_ITEMS
from renderers.text import format_when, summary

PENDING_PER_PAGE = MAX_ITEMS
_PENDING = re.compile(r"^\s*/?pending(?:\s+(\d{1,6}))?\s*$", re.IGNORECASE)


def pending_command(text: str) -> int | None:
    """``/pending`` or ``/pending 2`` → the page wanted; None for anything else."""
    match = _PENDING.match(text)
    if match is None:
        return None
    return int(match.group(1)) if match.group(1) else 1


def pending_reply(page: PendingPage, locale: str | None = None) -> str:
    """One page as plain text (card text is model-written: the reply is sent as plain
    text, which Feishu never parses for mentions or links).

    Feishu does not tell a bot which language a person reads, so the list speaks the
    ``locale`` given, else the one locale all its cards' routes share (``en`` when they
    differ); dates are in each card's route time zone."""
    chosen = locale or _shared_locale(page)
    with i18n.speaking(chosen):
        if not page.total:
            return i18n.t("pending.none")
        lines = [i18n.t("pending.count", total=page.total)]
    for number, card in enumerate(page.cards, page.first):
        with i18n.speaking(chosen, card.timezone):
            due = i18n.t("pending.due", when=format_when(card.deadline)) if card.deadline \
                else ""
            agent = i18n.t("pending.agent", agent=card.agent_name)
            shown = dataclasses.replace(card, locale=i18n.current_locale())
        lines.append(f"{number}. {summary(shown, 150)} ({agent}{due})")
    if page.page < page.pages:
        with i18n.speaking(chosen):
            lines.append(i18n.t("pending.next_feishu", page=page.page, pages=page.pages,
                                next=page.page + 1))
    return "\n".join(lines)


def _shared_locale(page: PendingPage) -> str | None:
    locales = {card.locale for card in page.cards}
    return locales.pop() if len(locales) == 1 else None
