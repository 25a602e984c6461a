"""The pending list with checkboxes (``/askhuman pending`` and App Home), and reading
a "Approve selected" / "Reject selected" click back.

Identifiers: each checkbox group is an optional ``input`` block ``ahb_sel:{n}`` whose
options carry a request ref as their value; the reason is the ``input`` block
``ahb_reason``; the buttons' ``action_id`` is ``ahb:approve`` / ``ahb:reject``. Only
refs travel, so a forged payload can name any request: the engine authorizes and
judges each item as a click on its card.

Requests are grouped by route; Slack's ``checkboxes`` element takes at most 10
options, so a longer group gets several. Requests that need their form
(``renderers.batch.batchable``) are listed, without a checkbox, with a pointer to their
card. Model-written titles go into ``plain_text`` (never parsed) or escaped mrkdwn.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from renderers import i18n
from renderers.batch import batchable, by_route, split
from renderers.card import RequestCard
from renderers.markdown import plain, slack_escape, truncate
from renderers.slack.kit import Block, context, plain_text, section
from renderers.text import format_when
from renderers.words import said

BATCH_PREFIX = "ahb:"
BATCH_ACTION_ID_PATTERN = re.compile(r"^ahb:(approve|reject)$")
SELECT_BLOCK = "ahb_sel:"
REASON_BLOCK = "ahb_reason"
OPTION_CHARS = 75
"""Slack's limit for an option's text and description."""


def batch_blocks(cards: Sequence[RequestCard], routes: Mapping[str, str],
                 locale: str | None = None, timezone: str | None = None,
                 *, prefix: str = "") -> list[Block]:
    """The checkbox list, the reason and the two buttons (nothing when no card may be
    decided from the list). ``prefix`` keeps block ids unique next to other blocks."""
    with i18n.speaking(locale, timezone):
        words = i18n.current_locale()
        blocks: list[Block] = []
        groups = 0
        for route, members in by_route(cards, routes):
            heading = said("batch.route", route=truncate(route, 100)).text(words)
            chunks = split([c for c in members if batchable(c)])
            if not chunks:
                blocks.append(section("*" + slack_escape(heading) + "*"))
            for chunk in chunks:  # the route is the label of its checkbox groups
                blocks.append(_checkboxes(chunk, f"{prefix}{SELECT_BLOCK}{groups}", heading))
                groups += 1
            on_card = [c for c in members if not batchable(c)]
            if on_card:
                lines = ["• " + slack_escape(said("batch.on_card", title=_title(c, 150))
                                             .text(words)) for c in on_card]
                blocks.append(context("\n".join(lines)))
        if not groups:
            return blocks
        blocks.append({"type": "input", "block_id": prefix + REASON_BLOCK, "optional": True,
                       "label": plain_text(said("batch.reason").text(words), 150),
                       "element": {"type": "plain_text_input", "action_id": "in",
                                   "multiline": True, "placeholder": plain_text(
                                       said("batch.reason_hint").text(words), 150)}})
        blocks.append({"type": "actions", "block_id": prefix + "ahb_go", "elements": [
            _button("approve", said("batch.approve_selected").text(words), "primary"),
            {**_button("reject", said("batch.reject_selected").text(words), "danger"),
             "confirm": {"title": plain_text(said("batch.reject_selected").text(words), 100),
                         "text": plain_text(said("batch.confirm").text(words), 300),
                         "confirm": plain_text(said("batch.reject_selected").text(words), 30),
                         "deny": plain_text(i18n.t("cancel"), 30)}},
        ]})
    return blocks


def read_selection(state_values: Mapping[str, Any]) -> tuple[list[str], str | None]:
    """``(selected refs in list order, reason)`` from a list's ``state.values`` (a
    message's, or App Home's)."""
    refs: list[str] = []
    reason: str | None = None
    for block_id, inputs in state_values.items():
        if not isinstance(block_id, str) or not isinstance(inputs, dict):
            continue
        for value in inputs.values():
            if not isinstance(value, dict):
                continue
            if block_id.endswith(REASON_BLOCK) and isinstance(value.get("value"), str):
                reason = value["value"]
            elif SELECT_BLOCK in block_id:
                for option in value.get("selected_options") or []:
                    if isinstance(option, dict) and isinstance(option.get("value"), str):
                        refs.append(option["value"])
    return refs, reason


def _title(card: RequestCard, limit: int) -> str:
    return plain(" ".join((card.args.title or card.args.question).split()), limit)


def _checkboxes(cards: Sequence[RequestCard], block_id: str, label: str) -> Block:
    options = []
    for card in cards:
        due = i18n.t("pending.due", when=format_when(card.deadline)).lstrip(", ") \
            if card.deadline else ""
        about = i18n.t("pending.agent", agent=card.agent_name) + (f" · {due}" if due else "")
        options.append({"text": plain_text(_title(card, OPTION_CHARS), OPTION_CHARS),
                        "description": plain_text(plain(about, OPTION_CHARS), OPTION_CHARS),
                        "value": card.ref})
    return {"type": "input", "block_id": block_id, "optional": True,
            "label": plain_text(label, 150),
            "element": {"type": "checkboxes", "action_id": "in", "options": options}}


def _button(verb: str, text: str, style: str) -> Block:
    return {"type": "button", "action_id": f"{BATCH_PREFIX}{verb}", "value": verb,
            "style": style, "text": plain_text(text, 75)}


