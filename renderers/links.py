"""Links can't lie: a link whose text names one host must not lead to another.

Model Markdown such as ``[https://good.example.com/notes](https://evil.example.net/x)``
would render on Slack and Feishu as a link that *shows* one address and *opens*
another. Every renderer asks ``misleading_host(text, href)`` before it builds a link;
when it answers a host, the renderer writes the text as plain text followed by
"(links to <host>)" instead of a link, so the person sees where the link really goes.

The rule, in one place for Slack mrkdwn, Feishu Markdown and plain text:

* A word of the link text "looks like an address" when it is a URL (``https://…``,
  ``//…``, ``mailto:…``), an e-mail address, or a domain with or without a path
  (``good.example.com/notes``, ``www.paypal.com``, ``pаypal.com``): dot-separated
  labels ending in an alphabetic top-level label (or ``xn--…``), or an IP literal.
* Hosts are compared normalised: lower-case, trailing dot stripped, user-info
  dropped (``https://good.example.com@evil.net`` has host ``evil.net``),
  percent-escapes decoded, and IDNA/UTS-46 encoded, so ``bücher.example`` and
  ``xn--bcher-kva.example`` are the same host and a Cyrillic ``pаypal.com`` is not
  ``paypal.com``.
* A URL in the text that carries user-info of its own (``https://good.com@evil.net``)
  is misleading whatever the target: a reader sees ``good.com``.
* The host shown is the ASCII (punycode) form, so a homoglyph cannot hide in it.

Text that is not address-like ("the notes") stays a link, and so does an autolink,
whose text is its target. A file name with a country-code ending (``README.md``)
looks like a domain and is therefore shown unlinked when it points elsewhere: a
lost click is cheaper than a lie.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from urllib.parse import unquote, urlsplit

import idna

from renderers import parser
from renderers.parser import Node, TooDeep, Tree

_TRIM = "()[]{}<>\"'`.,;:!?*_~|"
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)
_WORD = re.compile(r"\S+")
_ASCII_HOST = re.compile(
    r"^(?:(?:[a-z0-9_](?:[a-z0-9_-]{0,62}[a-z0-9_])?\.)+(?:[a-z]{2,63}|xn--[a-z0-9-]{1,59})"
    r"|\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-f:.]+\])$"
)
TRICK = "\x00user-info"
"""``text_hosts`` marker for a URL whose user-info poses as a host."""


@lru_cache(maxsize=4096)
def normal_host(host: str) -> str | None:
    """``host`` compared-ready: lower-case ASCII (IDNA), no trailing dot; ``None`` if it
    is not a host name at all."""
    host = unquote(host).strip().rstrip(".").lower()
    if not host:
        return None
    if host.startswith("["):
        ascii_host = host
    else:
        try:
            ascii_host = idna.encode(host, uts46=True).decode("ascii")
        except (idna.IDNAError, UnicodeError, ValueError):
            ascii_host = host  # not valid IDNA: compared as written (never equal to ASCII)
    return ascii_host if _ASCII_HOST.match(ascii_host) else None


def _word_host(word: str) -> str | None:
    """The host an address-like word names, ``TRICK``, or ``None`` (not an address)."""
    word = word.strip(_TRIM)
    scheme = _SCHEME.match(word)
    if scheme and scheme.group().lower() == "mailto:":
        return normal_host(word[7:].split("?")[0].rpartition("@")[2])
    has_authority = "//" in word[: (scheme.end() if scheme else 0) + 2]
    if scheme and not has_authority:
        return None  # "note:", "javascript:…", "e.g.:" — not an address
    try:
        parts = urlsplit(word if has_authority else "//" + word)
        host = parts.hostname
    except ValueError:
        return None
    if host is None:
        return None
    normal = normal_host(host)
    if normal is not None and has_authority and "@" in parts.netloc:
        user = parts.netloc.rpartition("@")[0]
        if "." in user or ":" in user:
            return TRICK
    return normal


def text_hosts(text: str) -> list[str]:
    """Every host the words of ``text`` name (``TRICK`` for a user-info disguise)."""
    return [host for word in _WORD.findall(text) if (host := _word_host(word))]


def target_host(href: str) -> str | None:
    """The host a link opens: the URL's host, or a ``mailto:`` address's domain."""
    try:
        parts = urlsplit(href.strip())
    except ValueError:
        return None
    if parts.scheme.lower() == "mailto":
        return normal_host(parts.path.rpartition("@")[2])
    return normal_host(parts.hostname or "")


def misleading_host(text: str, href: str) -> str | None:
    """The real host to show when ``text`` names a host ``href`` does not lead to.

    ``None`` means the link may stay a link: its text names no address, or only the
    target's own host.
    """
    named = text_hosts(text)
    if not named:
        return None
    real = target_host(href)
    if all(host == real for host in named):
        return None
    return real or href.split(":", 1)[0].lower() + ":"


# ---------------------------------------------------------------- plain text

_INLINE_LINK = re.compile(
    r"\[([^\[\]\n]*)\]\(\s*(?:<[^<>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"
    r"(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?\s*\)"
)
_LINK_SYNTAX = re.compile(r"\](?=\s*[(\[:])")
WORD_JOINER = "\u2060"


def links_in(source: str) -> list[tuple[str, str]]:
    """``(words shown, href)`` of every link and image Markdown ``source`` renders."""
    return parser.read(source, _links)


def _links(tree: Tree) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []

    def visit(nodes: Sequence[Node], words: list[str] | None, depth: int) -> None:
        if depth > tree.depth_limit:
            raise TooDeep
        for node in nodes:
            name = node.name
            if name == "link":
                inner: list[str] = []
                visit(node.children, inner, depth + 1)
                found.append(("".join(inner), str(node.meta["url"])))
            elif name == "autolink":
                found.append((tree.autolink_text(node), str(node.meta["url"])))
            elif name == "image":  # its label is not walked: markdown-it-py keeps it whole
                found.append((tree.label(node), str(node.meta["url"])))
            elif name in ("text", "text_special") and words is not None:
                words.append(node.meta["content"])
            elif name == "code_inline" and words is not None:
                words.extend(c.meta["content"] for c in node.children)
            else:
                visit(node.children, words, depth + 1)

    visit(tree.root.children, None, 1)
    return found


def honest_source(source: str, note: Callable[[str], str]) -> str:
    """Markdown ``source`` for plain text, where no link may lie either.

    The plain-text renderer shows Markdown as written, but what it writes may be read
    by something that renders Markdown. Each misleading inline link becomes its text
    followed by ``note(real host)``; if a misleading link is still there (a reference
    link, odd nesting), every ``](``, ``][`` and ``]:`` gets a word joiner, so no link
    of any kind can be parsed from the result.
    """

    def fix(match: re.Match[str]) -> str:
        found = links_in(match.group())
        real = misleading_host(*found[0]) if len(found) == 1 else None
        return match.group() if real is None else f"{match.group(1)} ({note(real)})"

    out = _INLINE_LINK.sub(fix, source)
    if any(misleading_host(text, href) for text, href in links_in(out)):
        out = _LINK_SYNTAX.sub("]" + WORD_JOINER, out)
    return out
