"""Untrusted text → Slack mrkdwn, Feishu markdown and plain text, safely.

Everything the model writes (title, question, Markdown body, labels, options,
placeholders) may try to ping a whole channel, mention people or smuggle a
``javascript:`` link. This module (with ``renderers.walker``, the walk over a parsed
body, and ``renderers.escapes``, the single strings) is the one place that knows how
each platform parses text, so the renderers never build markup by hand:

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

import json
import re
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from renderers import i18n, parser
from renderers.checks import UnsafeOutputError, check_feishu, check_plain, check_slack
from renderers.escapes import (
    ELLIPSIS,
    SAFE_SCHEMES,
    WORD_JOINER,
    clean,
    defuse_broadcasts,
    feishu_escape,
    is_safe_url,
    message_text,
    plain,
    plain_each,
    safe_cut,
    slack_escape,
    truncate,
)
from renderers.parser import Node, TooDeep, Tree
from renderers.walker import FEISHU, SLACK, Dialect, Walk, tree_units, walk_block

__all__ = [  # re-exported from renderers.escapes and renderers.walker
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
    "chunks_reach",
    "clean",
    "defuse_broadcasts",
    "feishu_escape",
    "fit_chunks",
    "is_safe_url",
    "json_bytes",
    "markdown_chunks",
    "markdown_units",
    "message_text",
    "plain",
    "plain_each",
    "slack_escape",
    "split_units",
    "truncate",
]

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
        self._walker: Walk | None = None
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
        walk = self._walker  # kept between calls: a first render walks a unit per call
        try:
            while index is None or index >= len(self.units):
                held = self._tree_with(self._next_block)
                if held is None:
                    self._finished, self._held, self._walker = True, None, None
                    return
                if walk is None or walk.tree is not held.tree:
                    walk = self._walker = Walk(self.d, held.tree, [], [])
                walk_block(walk, held.blocks[self._next_block], 1)  # leaves no list, no quote
                self._next_block += 1
                unit = walk.take_unit()
                if unit:
                    self.units.append(unit)
        except TooDeep:
            self._walker = None
            if walk is None or type(walk.tree) is Tree:  # markdown-it-py's: never too deep
                raise
            self.units = list(tree_units(parser.parse_python(self.source), self.d))
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
        No lock: ``_walk`` holds the tree it walks, and keeps a walker only with a
        tree it parses (and ``_keep`` registers)."""
        self._held = self._walker = None


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


FIT_LOSS = 50
"""The most ``fit_chunks`` takes off the start of a body longer than its budget: it
cuts the first chunk that does not fit to its room less one character for the ellipsis
and up to 8 for an entity, or, with 40 characters or fewer left, cuts the last chunk
kept by as much (40 + 10)."""
_JSON_ESCAPED = re.compile(r'["\\\x00-\x09\x0b-\x1f]')
"""Characters a JSON string escapes, but the line break (``\\n``, one byte more)."""


def json_bytes(text: str) -> int:
    """Bytes of ``text`` as a JSON string, quotes included (UTF-8, no ASCII escaping)."""
    if _JSON_ESCAPED.search(text) is None:
        size = len(text) if text.isascii() else len(text.encode())
        return size + 2 + text.count("\n")
    return len(json.dumps(text, ensure_ascii=False).encode())


def chunks_reach(source: str, d: Dialect, chunk_limit: int, budget: int, size: int) -> bool:
    """Whether the chunks of ``markdown_chunks(source, d, chunk_limit, budget)``, as JSON
    strings, add up to ``size`` bytes or more, known from as little of the body as that
    takes: a renderer can refuse a step the body would tip over its size limit without
    walking all of the body the step would show. False is no proof either way.

    What ``fit_chunks`` keeps of a longer body starts with its first ``budget -
    FIT_LOSS`` characters, in order, so the pieces (``_pieces``) within them are a
    proof: each is in a chunk as it is, and each after the first adds a ``"\n\n"``
    (4 bytes of JSON) or starts another chunk (more). Their characters are counted
    with 2 for each join, never fewer than the chunks hold; their bytes as UTF-8 with
    a line break's escape, never more than JSON writes (``"`` and ``\\`` are not
    looked for)."""
    if budget <= 40:
        return False
    units = _markdown_units(source, d, i18n.current_locale(), parser.active())
    units.expect(size)  # a character is at least a byte: never fewer than it takes
    chars = seen = -2
    for piece in _pieces(units, chunk_limit):
        chars += len(piece) + 2
        if chars > budget - FIT_LOSS:
            return False
        utf8 = len(piece) if piece.isascii() else len(piece.encode())
        seen += utf8 + piece.count("\n") + 4  # the first: its quotes; a later: its join
        if seen >= size:
            return True
    return False


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
