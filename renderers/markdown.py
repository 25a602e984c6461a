"""Untrusted text → Slack mrkdwn, Feishu markdown and plain text, safely.

Everything the model writes (title, question, Markdown body, labels, options,
placeholders) may try to ping a whole channel, mention people or smuggle a
``javascript:`` link. This module is the single place that knows how each
platform parses text, so the renderers never build markup by hand:

* ``clean`` strips control and bidi-override characters (terminal escapes,
  "Trojan source" reordering) from every string before anything else.
* Slack mrkdwn: ``& < >`` are escaped, bare ``@here``-style words get a word
  joiner, links are emitted only for http/https/mailto.
* Feishu markdown: every character Feishu treats as syntax is entity-escaped, so
  ``<at id=all>`` and friends become literal text.
* Plain text: no parsing happens on the platform, but we still defuse mention
  syntax so a later copy into a parsed field cannot ping anyone.

The ``check_*`` functions (``renderers.checks``) are the final post-check: they raise
``UnsafeOutputError`` if mention or broadcast syntax survived, because shipping
such a message silently would be a bug, never a feature.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import quote

from renderers import i18n, parser
from renderers.checks import UnsafeOutputError, check_feishu, check_plain, check_slack
from renderers.escapes import (
    ELLIPSIS,
    FEISHU_LINK,
    SAFE_SCHEMES,
    WORD_JOINER,
    clean,
    defuse_broadcasts,
    feishu_escape,
    is_safe_url,
    message_text,
    plain,
    safe_cut,
    slack_escape,
    truncate,
)
from renderers.links import misleading_host
from renderers.parser import Node, TooDeep, Tree

__all__ = [  # the primitives are re-exported from renderers.escapes
    "ELLIPSIS",
    "FEISHU",
    "SAFE_SCHEMES",
    "SLACK",
    "WORD_JOINER",
    "Dialect",
    "UnsafeOutputError",
    "check_feishu",
    "check_plain",
    "check_slack",
    "clean",
    "defuse_broadcasts",
    "feishu_escape",
    "fit_chunks",
    "is_safe_url",
    "markdown_chunks",
    "markdown_units",
    "message_text",
    "plain",
    "slack_escape",
    "split_units",
    "truncate",
]

# ---------------------------------------------------------------- dialects


@dataclass(frozen=True)
class Dialect:
    """How one platform spells the few Markdown constructs we keep."""

    escape: Callable[[str], str]
    bold: str
    italic: str
    strike: str
    link: Callable[[str, str], str]
    code: Callable[[str], str]


def _slack_link(url: str, label: str) -> str:
    href = quote(url, safe="/:?=&#%@+,;~!$'*._-").replace("&", "&amp;")
    return f"<{href}|{label}>" if label else f"<{href}>"


def _slack_code(content: str) -> str:
    return "`" + slack_escape(content.replace("`", "'")) + "`"


def _feishu_link(url: str, label: str) -> str:
    href = quote(url, safe="/:?=&#%@+,;~!$'*._-")
    return f"[{label or feishu_escape(url)}]({href})"


def _feishu_code(content: str) -> str:
    """Code spans are literal in CommonMark, so defuse tags/links instead of escaping."""
    body = FEISHU_LINK.sub("]" + WORD_JOINER, plain(content.replace("`", "'")))
    return "`" + body + "`" if body.strip() else body


SLACK = Dialect(slack_escape, "*", "_", "~", _slack_link, _slack_code)
FEISHU = Dialect(feishu_escape, "**", "*", "~~", _feishu_link, _feishu_code)


# ---------------------------------------------------------------- Markdown → units


_MARKS = {"strong": "bold", "em": "italic", "strikethrough": "strike"}
_INLINE = frozenset({"text", "text_special", "softbreak", "hardbreak", "em", "strong",
                     "strikethrough", "code_inline", "link", "autolink", "image"})


def _inline(nodes: Sequence[Node], d: Dialect, tree: Tree, depth: int) -> str:
    """One inline run as platform markup. Links are rebuilt only for safe schemes and
    only when their text names no other host (``renderers.links``). Adjacent text is
    escaped as one string, as markdown-it joins it: ``\\@here`` is still ``@here``."""
    if depth > tree.depth_limit:
        raise TooDeep
    if len(nodes) == 1 and nodes[0].name == "text":  # most runs: a cell, an item, a title
        return d.escape(nodes[0].meta["content"])
    out: list[str] = []
    text = ""
    for node in nodes:
        name = node.name
        if name == "text" or name == "text_special":
            text += node.meta["content"]
            continue
        if text:
            out.append(d.escape(text))
            text = ""
        if name == "softbreak" or name == "hardbreak":
            out.append("\n")
        elif name in _MARKS:
            mark: str = getattr(d, _MARKS[name])
            out.append(mark + _inline(node.children, d, tree, depth + 1) + mark)
        elif name == "code_inline":
            out.append(d.code("".join(c.meta["content"] for c in node.children)))
        elif name == "link":
            label = _inline(node.children, d, tree, depth + 1).replace("\n", " ")
            said = _words(node.children, tree)
            out.append(_link_or_text(node.meta["url"], label, d, said))
        elif name == "autolink" or name == "image":
            said = tree.autolink_text(node) if name == "autolink" else tree.label(node)
            said = said or "image"
            out.append(_link_or_text(node.meta["url"], d.escape(said), d, said))
    if text:
        out.append(d.escape(text))
    return "".join(out)


def _words(nodes: Sequence[Node], tree: Tree) -> str:
    """The plain words a reader sees in a link's text (for ``misleading_host``)."""
    out: list[str] = []
    for node in nodes:
        name = node.name
        if name == "text" or name == "text_special":
            out.append(node.meta["content"])
        elif name == "softbreak" or name == "hardbreak":
            out.append(" ")
        elif name == "image":
            out.append(tree.label(node) or "image")
        elif name == "autolink":
            out.append(tree.autolink_text(node))
        else:  # marks and code: their words (a code span's text is its child)
            out.append(_words(node.children, tree))
    return "".join(out)


def _link_or_text(href: str, label: str, d: Dialect, said: str = "") -> str:
    """A real link for safe schemes whose text names no other host; otherwise the text
    followed by where it leads, as visible text that no platform parses as a link."""
    if is_safe_url(href):
        real = misleading_host(said, href)
        if real is None:
            return d.link(href, label)
        return label + d.escape(" (" + i18n.t("links_to", host=real) + ")")
    shown = d.escape(href)
    return label if not href or shown == label else f"{label} ({shown})"


@dataclass
class _Walk:
    """Mutable state while flattening one top-level block into text lines."""

    d: Dialect
    tree: Tree
    lines: list[str]
    lists: list[list[int]]  # [ordered (0/1), counter]
    quote: int = 0
    fresh_item: bool = False

    def prefix(self) -> str:
        """Indentation, bullet and quote marks for the next line of a list item."""
        pre = "> " * self.quote
        if not self.lists:
            return pre
        indent = "    " * (len(self.lists) - 1)
        ordered, counter = self.lists[-1]
        if not self.fresh_item:
            return pre + indent + "   "
        self.fresh_item = False
        bullet = f"{counter}. " if ordered else ("• " if len(self.lists) == 1 else "◦ ")
        return pre + indent + bullet

    def emit(self, text: str) -> None:
        if not self.quote and not self.lists and "\n" not in text:
            self.lines.append(text)
            return
        first = self.prefix()
        rest = "> " * self.quote + ("    " * len(self.lists) if self.lists else "")
        parts = text.split("\n")
        self.lines.append(first + parts[0])
        self.lines.extend(rest + p for p in parts[1:])


def _code_lines(content: str, d: Dialect) -> list[str]:
    body = d.code(content.rstrip("\n"))[1:-1] if content.strip() else ""
    return ["```", *body.split("\n"), "```"]


def _block(w: _Walk, node: Node, depth: int) -> None:
    """Flatten one block (and what it holds) into the walk's lines."""
    if depth > w.tree.depth_limit:
        raise TooDeep
    name = node.name
    if name == "paragraph":
        w.emit(_inline(node.children, w.d, w.tree, depth + 1))
    elif name == "heading" or name == "lheading":  # lheading: markdown-it.rs's setext
        text = _inline(node.children, w.d, w.tree, depth + 1)
        w.emit(f"{w.d.bold}{text}{w.d.bold}" if text.strip() else text)
    elif name == "bullet_list" or name == "ordered_list":
        ordered = name == "ordered_list"
        w.lists.append([int(ordered), int(node.meta.get("start", 1)) - 1 if ordered else 0])
        for item in node.children:
            w.lists[-1][1] += 1
            w.fresh_item = True
            _blocks(w, item.children, depth + 2)
        w.lists.pop()
    elif name == "blockquote":
        w.quote += 1
        _blocks(w, node.children, depth + 1)
        w.quote -= 1
    elif name == "table":  # one ``a | b | c`` line per row, header cells in bold
        for part in node.children:
            bold = w.d.bold if part.name == "thead" else ""
            for row in part.children:
                cells = [_inline(cell.children, w.d, w.tree, depth + 4).replace("\n", " ")
                         for cell in row.children]
                w.emit(" | ".join(f"{bold}{c}{bold}" if c else c for c in cells))
    elif name == "fence" or name == "code_block":
        for line in _code_lines(node.meta["content"], w.d):
            w.emit(line)
    elif name == "hr":
        w.emit("———")


def _blocks(w: _Walk, nodes: Sequence[Node], depth: int) -> None:
    """A container's children; inlines directly in it (a tight list's item) are a line."""
    run: list[Node] = []
    for node in nodes:
        if node.name in _INLINE:
            run.append(node)
            continue
        if run:
            w.emit(_inline(run, w.d, w.tree, depth))
            run = []
        _block(w, node, depth)
    if run:
        w.emit(_inline(run, w.d, w.tree, depth))


def markdown_units(source: str, d: Dialect) -> list[str]:
    """Parse Markdown and return one text unit per top-level block (paragraph, list…)."""
    return _markdown_units(source, d, i18n.current_locale(), parser.active()).all()


@lru_cache(maxsize=512)
def _markdown_units(source: str, d: Dialect, locale: str, _parser: str) -> _Units:
    """A card is rendered many times with the same body (each step of the budget ladder,
    every card update), so a body's units are memoized: the bodies of the last 512 cards
    (a few MB at most), enough for the cards a busy replica updates at once (128 was
    not). The parser is in the key, so the tests comparing the two never read each
    other's results; ``locale`` is, because a misleading link's note is in the card's
    language."""
    return _Units(clean(source), d)


_KEPT_WALKS = 16
"""Unfinished walks that keep their tree (~350 KB for a maximum body) to go on from;
an older one parses again if a later render needs more of its body."""
_walking: deque[_Units] = deque()
_walking_lock = threading.Lock()

FIRST_READ = 1024
"""The fewest characters of a body a first parse reads (then twice as many each time a
render needs more blocks): the Rust parser's cost, and the tree's, grow with what it
reads, and a card shows only the start of a long body."""


def _first_read(shown: int) -> int:
    """Characters of a body to parse first for a render that shows ``shown`` characters
    of its text: a quarter more, for markup that shows as less (a table's rule line, a
    heading's marks). Too few costs one more parse, never a different unit."""
    return max(FIRST_READ, shown + shown // 4)


class _Units:
    """One body's units in one dialect, walked only as far as renders have read them.

    A big card shows the start of its body (1,500 of 8,000 characters on a maximum
    Slack card), so its first render parses and walks only the start of the body; a
    later render that shows more (the decided card, without its options) goes on from
    there. Top-level blocks are walked one at a time and none depends on another, so
    the units are the same as from one whole walk.

    The start is parsed alone (``FIRST_READ``, cut after a newline): Markdown's blocks
    are read line by line, and a block is closed for good once a later line starts the
    next top-level block, so every top-level block of a prefix but its last (which the
    lines after it may continue) is the whole body's. A body with a reference
    definition, the one thing a later line can change an earlier block with, is parsed
    and walked whole at once. A Rust tree too deep to trust (``TooDeep``) has every
    unit read again from markdown-it-py's tree, as ``parser.read`` does; the units
    before it are the same in both (a parser reads blocks in order)."""

    def __init__(self, source: str, d: Dialect) -> None:
        self.source, self.d = source, d
        self.units: list[str] = []
        self._next_block = 0  # top-level blocks walked so far
        self._read = _first_read(0)  # characters the next parse reads
        self._held: _Held | None = None
        self._finished = False
        self._lock = threading.Lock()
        if "]:" in source:  # a reference definition may sit anywhere: walk it all now
            self._walk(None)

    def __iter__(self) -> Iterator[str]:
        index = 0
        while (unit := self._unit_at(index)) is not None:
            yield unit
            index += 1

    def expect(self, shown: int) -> None:
        """Size the first parse for a render that shows ``shown`` characters."""
        with self._lock:
            if self._held is None and self._next_block == 0 and not self._finished:
                self._read = _first_read(shown)

    def all(self) -> list[str]:
        """Every unit (the rest of the body parsed in one go)."""
        with self._lock:
            if not self._finished:
                self._walk(None)
        return list(self.units)

    def _unit_at(self, index: int) -> str | None:
        """Unit ``index``, walking as far as it (None past the last)."""
        units = self.units  # one list: ``_walk`` may put another in its place
        if index < len(units):
            return units[index]
        with self._lock:
            if not self._finished and index >= len(self.units):
                self._walk(index)
            units = self.units
            return units[index] if index < len(units) else None

    def _walk(self, index: int | None) -> None:
        """Walk blocks until there is a unit at ``index`` (None: all of them)."""
        if index is None:
            self._read = len(self.source)  # the next parse reads the rest at once
        walk: _Walk | None = None
        try:
            while index is None or index >= len(self.units):
                held = self._tree_with(self._next_block)
                if held is None:
                    self._finished, self._held = True, None
                    return
                if walk is None or walk.tree is not held.tree:
                    walk = _Walk(self.d, held.tree, [], [])
                _block(walk, held.blocks[self._next_block], 1)  # leaves no list, no quote
                self._next_block += 1
                unit = "\n".join(walk.lines)
                walk.lines, walk.fresh_item = [], False
                if unit.strip():
                    self.units.append(unit)
        except TooDeep:
            if walk is None or type(walk.tree) is Tree:  # markdown-it-py's: never too deep
                raise
            self.units = list(_units(parser.parse_python(self.source), self.d))
            self._finished, self._held = True, None

    def _tree_with(self, block: int) -> _Held | None:
        """A tree in which top-level block ``block`` is final (None: the body has no
        such block), parsing more of the body while the held one is too short."""
        held = self._held  # another walk may drop it meanwhile (``_keep``)
        while held is None or (block >= held.final and not held.whole):
            if held is not None:
                self._read *= 2
            end = self.source.find("\n", self._read - 1) + 1 or len(self.source)
            self._held = held = _Held.of(parser.first_tree(self.source, end), self.source)
            _keep(self)
        return held if block < held.final else None

    def drop_tree(self) -> None:
        """Forget the tree (a later render that needs more parses the body again).
        No lock: one assignment, and ``_walk`` holds the tree it walks."""
        self._held = None


@dataclass(frozen=True)
class _Held:
    """A parsed start of a body: its tree, its top-level blocks (a Rust list is made per
    read, so it is read once) and how many of them are final."""

    tree: Tree
    blocks: Sequence[Node]
    final: int
    whole: bool

    @classmethod
    def of(cls, tree: Tree, source: str) -> _Held:
        blocks = tree.root.children
        whole = len(tree.source) == len(source)
        return cls(tree, blocks, len(blocks) if whole else max(len(blocks) - 1, 0), whole)


def _keep(units: _Units) -> None:
    """Note a walk that holds a tree; the oldest of more than ``_KEPT_WALKS`` lets go."""
    with _walking_lock:
        _walking.append(units)
        old = _walking.popleft() if len(_walking) > _KEPT_WALKS else None
    if old is not None and old is not units:
        old.drop_tree()


def _units(tree: Tree, d: Dialect) -> Iterator[str]:
    """Every unit of a tree (markdown-it-py's, after a Rust tree was too deep)."""
    walk = _Walk(d, tree, [], [])
    for node in tree.root.children:
        _block(walk, node, 1)
        unit = "\n".join(walk.lines)
        walk.lines, walk.fresh_item = [], False
        if unit.strip():
            yield unit


# ---------------------------------------------------------------- splitting


def split_units(units: Iterable[str], limit: int) -> list[str]:
    """Pack units into chunks of at most ``limit`` chars, breaking at paragraph
    boundaries first, then at lines, then at spaces, and only then mid-word."""
    chunks: list[str] = []
    current = ""
    for piece in _pieces(units, limit):
        joined = f"{current}\n\n{piece}" if current else piece
        if len(joined) <= limit:
            current = joined
        else:
            chunks.append(current)
            current = piece
    if current:
        chunks.append(current)
    return [c for c in chunks if c]


def _pieces(units: Iterable[str], limit: int) -> Iterable[str]:
    for unit in units:
        if len(unit) <= limit:
            yield unit
            continue
        for line in unit.split("\n"):
            yield from _hard_split(line, limit)


def _hard_split(line: str, limit: int) -> Iterable[str]:
    while len(line) > limit:
        cut = line.rfind(" ", limit // 2, limit)
        head = safe_cut(line, limit) if cut == -1 else line[:cut]
        head = head or line[:limit]
        yield head
        line = line[len(head):].lstrip(" ")
    if line:
        yield line


def fit_chunks(chunks: Sequence[str], budget: int) -> list[str]:
    """Keep whole chunks while they fit in ``budget`` chars; cut the next with "…"."""
    kept: list[str] = []
    used = 0
    for chunk in chunks:
        if used + len(chunk) <= budget:
            kept.append(chunk)
            used += len(chunk)
            continue
        room = budget - used
        if room > 40:
            kept.append(truncate(chunk, room))
        elif kept:
            kept[-1] = truncate(kept[-1], max(len(kept[-1]) - 1, 1))
        else:
            kept.append(ELLIPSIS)
        break
    return kept


def markdown_chunks(source: str, d: Dialect, chunk_limit: int, budget: int) -> list[str]:
    """Markdown body → platform text chunks, each ≤ ``chunk_limit``, all ≤ ``budget``:
    ``fit_chunks(split_units(markdown_units(…)))``, reading only the units it shows."""
    units = _markdown_units(source, d, i18n.current_locale(), parser.active())
    units.expect(budget)
    return fit_chunks(list(_chunks_until(units, chunk_limit, budget)), budget)


def _chunks_until(units: Iterable[str], limit: int, budget: int) -> Iterator[str]:
    """``split_units``' chunks, lazily, up to the first that ``fit_chunks`` cuts.

    That chunk is given as soon as it is longer than the room left, even if more units
    would join it: ``fit_chunks`` keeps only the start of it, which is already there
    (and nothing of it when 40 characters or fewer are left)."""
    used, current = 0, ""
    for piece in _pieces(units, limit):
        joined = f"{current}\n\n{piece}" if current else piece
        if len(joined) <= limit:
            current = joined
        else:
            if current:
                yield current
            used, current = used + len(current), piece
        if used + len(current) > budget:
            break
    if current:
        yield current
