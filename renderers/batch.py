"""Batch decisions: which requests a list may offer with a checkbox, and how a batch
choice ("approve selected" / "reject selected") maps onto one request's own action.

The rule (``docs/batch.md``): a request can be decided from a list, without its form,
when

- it is a tool approval (its engine-made actions ``approve`` and ``reject``), or
- it is an ask_human request with exactly one ``primary`` action (approve-like) and
  exactly one ``destructive`` action (reject-like), and no required field other than a
  reason (a paragraph field called ``reason``, or ``askhuman_reason`` that the route's
  ``require_reason`` adds).

Anything else (a form to fill in, a choice among several answers, files) is listed
with a pointer to its card. The batch's one optional reason goes into the request's
reason field, when it has one; a route's ``require_reason`` is then judged per request
exactly as for a click on the card.

A batch click is stored in the click inbox with a *token* instead of an action id
(``APPROVE_TOKEN`` / ``REJECT_TOKEN``: not identifiers, so no model-written action can
be mistaken for one) and mapped with the card when it is decided (``batch_choice``).
Pure functions: the engine and every platform's list renderer share them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bot.askhuman.schema import AskHumanAction, ParagraphField
from renderers.card import RequestCard
from renderers.tool_card import APPROVE, REJECT

MAX_ITEMS = 20
"""The most requests one list shows, and one batch decides."""
SLACK_OPTIONS = 10
"""Slack's ``checkboxes`` element takes at most 10 options: longer groups are split."""
APPROVE_TOKEN = "-batch-approve"
REJECT_TOKEN = "-batch-reject"
VERBS: Mapping[str, str] = {"approve": APPROVE_TOKEN, "reject": REJECT_TOKEN}
"""A list button's verb → the token its stored clicks carry."""
REASON_FIELDS = ("reason", "askhuman_reason")
"""Names of the paragraph field a reason goes in (the tool card's, the route's)."""


def is_batch_token(action_id: str) -> bool:
    return action_id in (APPROVE_TOKEN, REJECT_TOKEN)


def reason_field(card: RequestCard) -> str | None:
    """The paragraph field the batch's reason goes in, if the card has one."""
    return next((f.name for f in card.args.fields
                 if isinstance(f, ParagraphField) and f.name in REASON_FIELDS), None)


def batch_actions(card: RequestCard) -> tuple[AskHumanAction, AskHumanAction] | None:
    """``(approve-like, reject-like)`` actions of a request a list may decide, else None."""
    actions = card.args.actions
    if card.tool is not None:
        approve = next((a for a in actions if a.id == APPROVE), None)
        reject = next((a for a in actions if a.id == REJECT), None)
    else:
        primary = [a for a in actions if a.style == "primary"]
        destructive = [a for a in actions if a.style == "destructive"]
        if len(primary) != 1 or len(destructive) != 1:
            return None
        approve, reject = primary[0], destructive[0]
    if approve is None or reject is None:
        return None
    reason = reason_field(card)
    if any(f.required and f.name != reason for f in card.args.fields):
        return None
    return approve, reject


def batchable(card: RequestCard) -> bool:
    """Whether a list may offer ``card`` with a checkbox."""
    return card.status == "pending" and batch_actions(card) is not None


def batch_choice(card: RequestCard, token: str, reason: str | None
                 ) -> tuple[AskHumanAction, dict[str, str]] | None:
    """The action ``token`` stands for on ``card`` and the values to answer with (the
    reason in the card's reason field); None when the card cannot be decided so."""
    pair = batch_actions(card)
    if pair is None or not is_batch_token(token):
        return None
    action = pair[0] if token == APPROVE_TOKEN else pair[1]
    field = reason_field(card)
    values = {field: reason} if field is not None and reason else {}
    return action, values


def split(items: Sequence[RequestCard], size: int = SLACK_OPTIONS) -> list[list[RequestCard]]:
    """``items`` in runs of at most ``size`` (one checkbox group each)."""
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


def by_route(cards: Sequence[RequestCard], routes: Mapping[str, str]
             ) -> list[tuple[str, list[RequestCard]]]:
    """The cards grouped by route (``routes``: ref → route name), groups in the order
    their first request comes."""
    groups: dict[str, list[RequestCard]] = {}
    for card in cards:
        groups.setdefault(routes.get(card.ref, ""), []).append(card)
    return list(groups.items())
