"""The final post-check of every rendered payload (re-exported by ``renderers.markdown``).

``check_slack`` / ``check_feishu`` raise ``UnsafeOutputError`` if mention, broadcast or
(Feishu Markdown) unsafe link syntax survived in any string a person could see: shipping
such a message silently would be a bug, never a feature.

Every render ends here, and a big card holds a few thousand strings, so the strings are
gathered in one walk and searched as one text, joined by NUL: no forbidden pattern can
match a NUL or look across one (``<\\s*``, letters, ``\\b``), so the joined text has a
hit exactly when one of the strings has. Only then are they searched one by one, for
the same message as always.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from renderers.escapes import BROADCAST_WORD, FEISHU_TAGS, is_safe_url

_SLACK_FORBIDDEN = re.compile(r"<\s*[!@#]|@(?:here|channel|everyone)", re.IGNORECASE)
_FEISHU_FORBIDDEN = re.compile(rf"<\s*/?\s*(?:{FEISHU_TAGS})\b", re.IGNORECASE)
_FEISHU_MD_LINK = re.compile(r"\]\(([^)\s]*)\)")
_JOIN = "\x00"
_MARKDOWN_TAGS = ("markdown", "lark_md")


class UnsafeOutputError(RuntimeError):
    """Raised when rendered output still carries mention, broadcast or link syntax."""


_NOT_DISPLAYED = frozenset(
    {"value", "initial_value", "default_value", "initial_option", "initial_date",
     "selected_values", "action_id", "block_id", "name", "private_metadata",
     "callback_id", "behaviors", "url", "element_id"}
)


def _gather(obj: object, shown: list[str], markdown: list[str] | None, seen: bool) -> None:
    """Append every string a person could see (``seen``: not under an id, an option
    value or a prefill) to ``shown``, in order; with ``markdown``, also every content
    Feishu parses as Markdown (only there can ``[t](u)`` link), wherever it sits."""
    if isinstance(obj, str):
        if seen:
            shown.append(obj)
    elif isinstance(obj, dict):
        if markdown is not None and obj.get("tag") in _MARKDOWN_TAGS \
                and isinstance(obj.get("content"), str):
            markdown.append(obj["content"])
        for key, value in obj.items():
            if not isinstance(value, str):
                if markdown is not None or (seen and key not in _NOT_DISPLAYED):
                    _gather(value, shown, markdown, seen and key not in _NOT_DISPLAYED)
            elif seen and key not in _NOT_DISPLAYED:
                shown.append(value)
    elif isinstance(obj, list):
        for item in obj:
            _gather(item, shown, markdown, seen)


def _without(texts: list[str], allowed: tuple[str, ...]) -> list[str]:
    for mention in allowed:
        texts = [text.replace(mention, "") for text in texts]
    return texts


def check_slack(payload: object, allowed_mentions: Iterable[str] = ()) -> None:
    """Raise if any displayed string could mention, broadcast or link unexpectedly."""
    shown: list[str] = []
    _gather(payload, shown, None, True)
    texts = _without(shown, tuple(allowed_mentions))
    if not _SLACK_FORBIDDEN.search(_JOIN.join(texts)):
        return
    for text in texts:
        hit = _SLACK_FORBIDDEN.search(text)
        if hit:
            raise UnsafeOutputError(f"Slack mention syntax survived: {hit.group()!r}")


def check_feishu(payload: object, allowed_mentions: Iterable[str] = ()) -> None:
    """Raise if a Feishu tag, broadcast word or (in markdown) an unsafe link survived.

    ``allowed_mentions`` are exact ``<at id=…></at>`` strings the renderer emitted on
    purpose (the verified decider); everything else is forbidden.
    """
    shown: list[str] = []
    markdown: list[str] = []
    _gather(payload, shown, markdown, True)
    texts = _without(shown, tuple(allowed_mentions))
    joined = _JOIN.join(texts)
    if _FEISHU_FORBIDDEN.search(joined) or BROADCAST_WORD.search(joined):
        for text in texts:
            hit = _FEISHU_FORBIDDEN.search(text) or BROADCAST_WORD.search(text)
            if hit:
                raise UnsafeOutputError(f"Feishu mention syntax survived: {hit.group()!r}")
    for content in markdown:
        for url in _FEISHU_MD_LINK.findall(content):
            if not is_safe_url(url):
                raise UnsafeOutputError(f"Feishu link with unsafe scheme: {url!r}")


def check_plain(text: str) -> None:
    """Plain text must satisfy both platforms' rules (it may be pasted into either)."""
    check_slack(text)
    check_feishu(text)
