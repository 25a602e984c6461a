"""How a stored batch click is read once its card is loaded (``Decider``'s ``read``).

A batch click carries a token (``renderers.batch``) and the batch's one reason; the
card says which of its actions the token stands for and where the reason goes. A card
that cannot be decided from a list (a forged or stale payload naming it) is refused
per item, audited, with words that point to its card.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import JsonValue

from bot.engine.values import InvalidValues
from renderers.batch import batch_choice
from renderers.card import RequestCard
from renderers.words import said

REASON = "reason"
"""The key of the batch's reason in a stored batch click's values."""


def read_batch_click(card: RequestCard, token: str, values: Mapping[str, Any]
                     ) -> tuple[str, dict[str, JsonValue]]:
    """``(action id, contract values)`` for ``card``; ``InvalidValues`` when the card
    needs its own form."""
    reason = values.get(REASON)
    text = reason.strip() if isinstance(reason, str) else None
    choice = batch_choice(card, token, text or None)
    if choice is None:
        raise InvalidValues(said("batch.needs_card"))
    action, answer = choice
    return action.id, dict(answer)
