"""Feishu's pending list as a card 2.0: a form with a checker per request that may be
decided together, an optional reason, "Approve selected" and "Reject selected".

Identifiers: checkers are named ``c_{n}``; each submit button's callback value is
``{"batch": verb, "refs": [ref of c_0, ref of c_1, …]}``, so a click carries which
checkers were ticked (``form_value``) and which request each stands for. Only refs
travel: a forged value may name any request, and the engine authorizes and judges each
item as a click on its card. Model-written titles go into ``plain_text`` only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from renderers import i18n
from renderers.batch import MAX_ITEMS, VERBS, batchable, by_route
from renderers.card import MAX_REF_CHARS, RequestCard
from renderers.markdown import plain, truncate
from renderers.text import format_when
from renderers.words import said

FORM_NAME = "askhuman_batch"
REASON_INPUT = "reason"
TITLE_CHARS = 120


def batch_card(cards: Sequence[RequestCard], routes: Mapping[str, str], total: int, *,
               page: int = 1, pages: int = 1, locale: str | None = None,
               answer: str | None = None) -> dict[str, Any]:
    """The list card (``answer``: what became of the last batch, plain text, on top)."""
    with i18n.speaking(locale):
        words = i18n.current_locale()
        head = i18n.t("pending.count", total=total) if total else i18n.t("pending.none")
        elements: list[dict[str, Any]] = []
        if answer:
            elements.append(_div(answer, 2000))
        listed, refs = _listed(cards, routes, words)
        if refs:
            elements.append({"tag": "form", "name": FORM_NAME,
                             "elements": [*listed, *_controls(refs, words)]})
        else:
            elements += listed
        if page < pages:
            elements.append(_div(i18n.t("pending.next_feishu", page=page, pages=pages,
                                        next=page + 1), 200))
    return {"schema": "2.0",
            "config": {"update_multi": True, "summary": {"content": plain(head, 100)}},
            "header": {"title": {"tag": "plain_text", "content": plain(head, 100)},
                       "template": "blue"},
            "body": {"elements": elements}}


def _listed(cards: Sequence[RequestCard], routes: Mapping[str, str], words: str
            ) -> tuple[list[dict[str, Any]], list[str]]:
    elements: list[dict[str, Any]] = []
    refs: list[str] = []
    for route, members in by_route(cards, routes):
        elements.append(_div(said("batch.route", route=truncate(route, 100)).text(words), 150))
        for card in members:
            title = plain(" ".join((card.args.title or card.args.question).split()),
                          TITLE_CHARS)
            due = i18n.t("pending.due", when=format_when(card.deadline)) if card.deadline \
                else ""
            about = i18n.t("pending.agent", agent=card.agent_name) + due
            if not batchable(card):
                elements.append(_div("• " + said("batch.on_card", title=f"{title} ({about})")
                                     .text(words), 400))
                continue
            elements.append({"tag": "checker", "name": f"c_{len(refs)}", "checked": False,
                             "text": {"tag": "plain_text",
                                      "content": plain(f"{title} ({about})", 300)}})
            refs.append(card.ref)
    return elements, refs


def _controls(refs: list[str], words: str) -> list[dict[str, Any]]:
    reason = {"tag": "input", "name": REASON_INPUT, "input_type": "multiline_text",
              "required": False, "max_length": 1000,
              "placeholder": {"tag": "plain_text",
                              "content": plain(said("batch.reason").text(words), 100)}}
    buttons = [_button("approve", said("batch.approve_selected").text(words),
                       "primary_filled", refs),
               {**_button("reject", said("batch.reject_selected").text(words),
                          "danger_filled", refs),
                "confirm": {"title": {"tag": "plain_text", "content": plain(
                    said("batch.reject_selected").text(words), 50)},
                    "text": {"tag": "plain_text",
                             "content": plain(said("batch.confirm").text(words), 100)}}}]
    return [reason, {"tag": "column_set", "flex_mode": "flow", "columns": [
        {"tag": "column", "width": "auto", "elements": [b]} for b in buttons]}]


def _button(verb: str, text: str, kind: str, refs: list[str]) -> dict[str, Any]:
    return {"tag": "button", "text": {"tag": "plain_text", "content": plain(text, 40)},
            "type": kind, "name": f"batch_{verb}", "form_action_type": "submit",
            "behaviors": [{"type": "callback", "value": {"batch": verb, "refs": refs}}]}


def _div(text: str, limit: int) -> dict[str, Any]:
    return {"tag": "div", "text": {"tag": "plain_text", "content": plain(text, limit) or "…"}}


def is_batch_value(value: object) -> bool:
    """Whether a callback value is a list button's (``{"batch": …}``)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return False
    return isinstance(value, dict) and "batch" in value


def read_batch(value: object, form_value: Mapping[str, Any] | None
               ) -> tuple[str, list[str], str | None] | None:
    """``(verb, selected refs, reason)`` from a list button's callback; None when the
    value is not one (malformed, an unknown verb)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, dict) or value.get("batch") not in VERBS:
        return None
    refs = value.get("refs")
    if not isinstance(refs, list):
        return None
    form = form_value or {}
    chosen = [ref for i, ref in enumerate(refs[:MAX_ITEMS * 5])
              if isinstance(ref, str) and 0 < len(ref) <= MAX_REF_CHARS
              and form.get(f"c_{i}") is True]
    reason = form.get(REASON_INPUT)
    return str(value["batch"]), chosen, reason if isinstance(reason, str) else None
