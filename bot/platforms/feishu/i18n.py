"""Toasts in the clicker's own language: Feishu picks it, we give both.

A callback toast may carry ``i18n: {"zh_cn": …, "en_us": …}``; the Feishu client shows
the text of the language the person uses (falling back to ``content``). So each toast
askhuman sends offers the words in Chinese (``renderers.words``) next to the English,
whenever they differ; model-written parts (labels, names) stay as they are.
"""

from __future__ import annotations

from typing import Any

from renderers.markdown import message_text
from renderers.words import Said

TOAST_CHARS = 500
"""Longest toast text shown."""


def toast_i18n(words: Said, shown: str) -> dict[str, Any]:
    """``{"i18n": {...}}`` to merge into a toast whose English text is ``shown``, or
    ``{}`` when the Chinese is the same."""
    chinese = message_text(words.text("zh-CN"), TOAST_CHARS) or "…"
    if chinese == shown:
        return {}
    return {"i18n": {"zh_cn": chinese, "en_us": shown}}
