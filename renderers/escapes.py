"""Untrusted strings made inert, one at a time: the primitives of ``renderers.markdown``.

``clean`` strips control and bidi-override characters; ``slack_escape`` and
``feishu_escape`` make text literal in each platform's markup; ``plain`` and
``message_text`` defuse mention and link syntax where nothing is parsed; ``truncate``
cuts without breaking an entity. ``renderers.markdown`` re-exports them all and says
why each exists.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import urlsplit

ELLIPSIS = "…"
WORD_JOINER = "\u2060"
SAFE_SCHEMES = frozenset({"http", "https", "mailto"})

_CONTROLS = r"\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ufeff"
_CONTROL = re.compile(f"[{_CONTROLS}]")
BROADCAST_WORD = re.compile(r"@(?=here|channel|everyone|all)", re.IGNORECASE)
_SLACK_ANGLE = re.compile(r"<(?=\s*[!@#])")
FEISHU_TAGS = "at|a|link|font|person|local_datetime|number_tag|text_tag|raw|img|br|hr"
_FEISHU_TAG = re.compile(rf"<(?=\s*/?\s*(?:{FEISHU_TAGS})\b)", re.IGNORECASE)
FEISHU_LINK = re.compile(r"\](?=\s*\()")


_FEISHU_ESCAPES = {
    "<": "&#60;", ">": "&#62;", "[": "&#91;", "]": "&#93;", "(": "&#40;", ")": "&#41;",
    "*": "&#42;", "_": "&#95;", "`": "&#96;", "~": "&sim;", "#": "&#35;", "-": "&#45;",
    "!": "&#33;", ":": "&#58;", "\\": "&#92;", "|": "&#124;",
}
_FEISHU_ESCAPE_RE = re.compile(r"[<>\[\]()*_`~#\-!:\\|]|&(?=#|[A-Za-z][A-Za-z0-9]*;)")
_SLACK_INERT = re.compile(f"[^&<>@{_CONTROLS}]*")
_FEISHU_INERT = re.compile(rf"[^<>\[\]()*_`~#\-!:\\|&@{_CONTROLS}]*")
_PLAIN_INERT = re.compile(f"[^<@{_CONTROLS}]*")
"""Text ``slack_escape`` / ``feishu_escape`` / ``plain`` would return unchanged (most of a
body, most labels)."""
_PLAIN_ASCII = re.compile(r"[ -;=-?A-~]*")
"""Printable ASCII but ``<`` and ``@``: ``_PLAIN_INERT`` for most labels, in half the
time (a small character class; a label's first render reads hundreds)."""


def clean(text: str) -> str:
    """Drop control and bidi characters; they can rewrite terminals or reorder text."""
    return _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def defuse_broadcasts(text: str) -> str:
    """Put a word joiner after ``@`` in @here/@channel/@everyone/@all (still readable)."""
    return BROADCAST_WORD.sub("@" + WORD_JOINER, text)


def truncate(text: str, limit: int) -> str:
    """Cut to ``limit`` characters with a visible ellipsis, never failing."""
    if len(text) <= limit:
        return text
    return safe_cut(text, max(limit - 1, 0)) + ELLIPSIS


def safe_cut(text: str, n: int) -> str:
    """Cut at ``n`` but never inside an ``&…;`` entity we produced."""
    head = text[:n]
    amp = head.rfind("&", max(0, n - 8))
    if amp != -1 and ";" not in head[amp:]:
        head = head[:amp]
    return head


def plain(text: str, limit: int | None = None) -> str:
    """Text for plain_text objects on either platform: cleaned, defused, truncated."""
    out = _plain_full(text)
    return out if limit is None else truncate(out, limit)


def plain_each(texts: Iterable[str], limit: int) -> list[str]:
    """``plain(text, limit)`` of each text in one loop (a select's options: a first
    render of a big card cuts a few hundred labels, and the calls were a third of it)."""
    out = []
    for text in texts:
        full = _plain_full(text)
        out.append(full if len(full) <= limit else safe_cut(full, max(limit - 1, 0)) + ELLIPSIS)
    return out


@lru_cache(maxsize=4096)
def _plain_full(text: str) -> str:
    """``plain`` before truncation, memoized: a card shows the same labels and options
    on every step of the budget ladder and on every update of the card. Most labels
    have no ``<``, ``@`` or control character: nothing to change, one scan."""
    if _PLAIN_ASCII.fullmatch(text) or _PLAIN_INERT.fullmatch(text):
        return text
    out = _FEISHU_TAG.sub("<" + WORD_JOINER, _SLACK_ANGLE.sub("<" + WORD_JOINER, clean(text)))
    return defuse_broadcasts(out)


def message_text(text: str, limit: int | None = None) -> str:
    """Untrusted text for a message we write outside the card renderers.

    For run results, reminders, replies, toasts and terminal output: ``plain`` (no
    control characters, no mention tags, no broadcast words) and no ``[label](url)``
    link either, because Feishu ``text`` messages parse links as well as ``<at>``.
    """
    out = FEISHU_LINK.sub("]" + WORD_JOINER, plain(text))
    return out if limit is None else truncate(out, limit)


def slack_escape(text: str) -> str:
    """Untrusted text as literal Slack mrkdwn (only ``& < >`` have escapes in Slack)."""
    if _SLACK_INERT.fullmatch(text):
        return text
    out = clean(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return defuse_broadcasts(out)


def feishu_escape(text: str) -> str:
    """Untrusted text as literal Feishu markdown, using Feishu's documented entities."""
    if _FEISHU_INERT.fullmatch(text):
        return text
    out = _FEISHU_ESCAPE_RE.sub(lambda m: _FEISHU_ESCAPES.get(m.group(), "&#38;"), clean(text))
    return defuse_broadcasts(out)


def is_safe_url(url: str) -> bool:
    """Only web and mail links are clickable; ``javascript:``, ``tel:``, … stay text."""
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError:
        return False
    return scheme in SAFE_SCHEMES and not _CONTROL.search(url)
