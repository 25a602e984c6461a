"""The toast a card click is answered with (the click's only acknowledgement).

It says what is true when it is sent: why a click was refused, that the answer was
taken (or the vote counted), or — only while the decision is still pending — that
it was received. The text is in the card's language, with the English and the
Chinese next to it for the Feishu client to pick the reader's own.
"""

from __future__ import annotations

from lark_oapi.event.callback.model.p2_card_action_trigger import (
    P2CardActionTriggerResponse,
)

from bot.engine.clicks import DEFERRED
from bot.engine.inbox import Click
from bot.engine.results import RespondResult
from bot.platforms.feishu.i18n import TOAST_CHARS, toast_i18n
from renderers.i18n import CATALOG, say
from renderers.markdown import message_text as inert_text
from renderers.words import Said, said

WORKING = CATALOG["en"]["click.received"]
RECEIVED_TEXTS = frozenset(CATALOG[locale]["click.received"] for locale in CATALOG)
"""The toast of a stored click whose decision is still pending (every locale)."""
RECEIVED = said("click.received")

_TOAST_KIND = {
    "accepted": "success",
    "recorded": "success",
    "rejected": "error",
    "already_decided": "error",
    "not_found": "error",
}


def received_text(click: Click) -> str:
    """The toast for a stored click still being decided, in its card's locale."""
    return say(click.reply_to.get("locale"), "click.received")


def toast_kind(result: RespondResult) -> str:
    """``success`` for an answer taken or a vote counted, ``error`` for a refusal,
    ``info`` for an answer received whose processing is still going on."""
    if result.words == DEFERRED:
        return "info"
    return _TOAST_KIND.get(result.outcome, "info")


def toast(kind: str, content: Said | str, locale: str | None = None
          ) -> P2CardActionTriggerResponse:
    """A toast-only callback reply (never a 2.0 card: Feishu may reject it, 200673):
    words (a ``Said``) in ``locale`` (the card's; English by default) with the English
    and Chinese next to them, or a text as it is."""
    text = content.text(locale) if isinstance(content, Said) else str(content)
    shown = inert_text(text, TOAST_CHARS) or "…"
    if shown in RECEIVED_TEXTS:  # the route's language, and both for the client to pick
        content = RECEIVED
    if not isinstance(content, Said):
        return P2CardActionTriggerResponse({"toast": {"type": kind, "content": shown}})
    english = inert_text(content.text("en"), TOAST_CHARS) or "…"
    both = toast_i18n(content, english)
    return P2CardActionTriggerResponse({"toast": {"type": kind, "content": shown, **both}})
