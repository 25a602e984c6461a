"""Toasts in the clicker's own language: Feishu picks it, we give both.

A callback toast may carry ``i18n: {"zh_cn": …, "en_us": …}``; the Feishu client shows
the text of the language the person uses (falling back to ``content``). So each toast
askhuman sends offers the catalog's Chinese (``renderers.i18n.translate``) next to the
English, whenever the catalog has the sentence; model-written parts (labels, names)
stay as they are.
"""

from __future__ import annotations

from typing import Any

from renderers import i18n


def toast_i18n(content: str) -> dict[str, Any]:
    """``{"i18n": {...}}`` to merge into a toast, or ``{}`` when nothing translates."""
    chinese = i18n.translate(content, "zh-CN")
    if chinese == content:
        return {}
    return {"i18n": {"zh_cn": chinese, "en_us": content}}
