"""The ephemeral ``/askhuman pending`` list: the plain text (also the notification
fallback) and the blocks with checkboxes for batch decisions
(``renderers.slack.batch_list``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from bot.engine.results import PendingPage
from renderers import i18n
from renderers.markdown import slack_escape
from renderers.slack.batch_list import batch_blocks
from renderers.slack.kit import Block
from renderers.text import format_when, summary


def pending_text(page: PendingPage, locale: str | None = None,
                 timezone: str | None = None) -> str:
    """An ephemeral page of open requests in the asker's ``locale`` (dates in their
    ``timezone``); card text is untrusted, escaped and never translated."""
    with i18n.speaking(locale, timezone):
        if not page.total:
            return i18n.t("pending.none") + " :tada:"
        lines = ["*" + i18n.t("pending.count", total=page.total) + "*"]
        for card in page.cards:
            due = i18n.t("pending.due", when=format_when(card.deadline)) if card.deadline \
                else ""
            agent = i18n.t("pending.agent", agent=f"`{slack_escape(card.agent_name)}`")
            shown = dataclasses.replace(card, locale=i18n.current_locale())
            lines.append(f"• {slack_escape(summary(shown, 150))} ({agent}{due})")
        if page.pages > 1:
            last = page.first + len(page.cards) - 1
            more = (i18n.t("pending.next_slack", next=page.page + 1)
                    if page.page < page.pages else "")
            lines.append("_" + i18n.t("pending.showing", first=page.first, last=last,
                                      total=page.total, page=page.page, pages=page.pages)
                         + f"{more}._")
        return "\n".join(lines)


def list_message(page: PendingPage, text: str, locale: str | None, zone: str | None,
                 answer: str | None = None) -> dict[str, Any]:
    """The ephemeral list: ``text`` (the plain list, also the notification fallback),
    then the checkboxes, reason and buttons; ``answer`` (safe mrkdwn) on top."""
    head, _, rest = text.partition("\n")
    blocks: list[Block] = []
    if answer:
        blocks.append(_section(answer))
    blocks.append(_section(head))
    blocks += batch_blocks(page.cards, page.routes, locale, zone)
    footer = [line for line in rest.split("\n") if line.startswith("_")]
    if footer:
        blocks.append({"type": "context", "elements": [
            {"type": "mrkdwn", "text": footer[-1], "verbatim": True}]})
    return {"text": (answer + "\n" if answer else "") + text, "blocks": blocks[:50]}


def _section(text: str) -> Block:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:3000] or " ",
                                        "verbatim": True}}


