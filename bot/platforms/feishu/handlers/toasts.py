"""The toast a card click is answered with (the click's only acknowledgement)."""

from __future__ import annotations

from lark_oapi.event.callback.model.p2_card_action_trigger import (
    P2CardActionTriggerResponse,
)

from bot.engine.inbox import Click
from bot.platforms.feishu.i18n import TOAST_CHARS, toast_i18n
from renderers.i18n import CATALOG, say
from renderers.markdown import message_text as inert_text
from renderers.words import Said

WORKING = CATALOG["en"]["click.received"]
RECEIVED_TEXTS = frozenset(CATALOG[locale]["click.received"] for locale in CATALOG)
"""The toast of a stored click (English)."""


def received_text(click: Click) -> str:
    """The toast for a stored click, in its card's locale."""
    return say(click.reply_to.get("locale"), "click.received")


def toast(kind: str, content: Said | str) -> P2CardActionTriggerResponse:
    """A toast-only callback reply (never a 2.0 card: Feishu may reject it, 200673):
    words (a ``Said``) in English with the Chinese next to them, or a text as it is."""
    shown = inert_text(str(content), TOAST_CHARS) or "…"
    if shown in RECEIVED_TEXTS:  # the route's language, and both for the client to pick
        both = {"i18n": {"zh_cn": CATALOG["zh-CN"]["click.received"], "en_us": WORKING}}
        return P2CardActionTriggerResponse({"toast": {"type": kind, "content": shown, **both}})
    both = toast_i18n(content, shown) if isinstance(content, Said) else {}
    return P2CardActionTriggerResponse({"toast": {"type": kind, "content": shown, **both}})


_TOAST_KIND = {
    "accepted": "success",
    "recorded": "success",
    "rejected": "error",
    "already_decided": "error",
    "not_found": "error",
}
