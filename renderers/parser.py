"""The one Markdown parser every renderer reads model Markdown with, behind one seam.

CommonMark without raw HTML, plus tables and strikethrough: the card renderers
(``renderers.markdown``) and the link check for plain text (``renderers.links``) must
agree on what is a link, so both read Markdown only through ``read``.

Two parsers give the same tree, in markdown-it.rs's shape (``Node``):

* **markdown-it-pyrs** (markdown-it.rs, in Rust) first: a maximum-size body parses in
  about a millisecond instead of ten, so a card's first render is cheap.
* **markdown-it-py** (the same algorithm in pure Python) when that wheel is missing,
  and for a body the Rust tree may differ on: one that nests deeper than
  markdown-it-py's ``maxNesting`` (it stops nesting at 20 levels; markdown-it.rs never
  does), one the two read differently (``rust_may_differ``), or one the Rust parser
  panics on (``![`` then three backticks does, in 0.4.0). Either way the rendered
  output does not depend on which parser ran (``tests/renderers/test_parsers.py``).

The tree: ``root`` → blocks (``paragraph``, ``heading``, ``lheading`` (a setext
heading, from Rust), ``bullet_list`` and ``ordered_list`` → ``list_item``,
``blockquote``, ``table`` → ``thead``/``tbody`` → ``trow`` → ``tcell``, ``fence``,
``code_block``, ``hr``, ``definition``) → inlines (``text``, ``text_special``,
``softbreak``, ``hardbreak``, ``em``, ``strong``, ``strikethrough``, ``code_inline``,
``link``, ``autolink``, ``image``). A tight list's paragraphs are left out: their
inlines sit in the ``list_item``, as markdown-it.rs does.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cached_property
from typing import Any, Protocol, TypeVar

from markdown_it import MarkdownIt
from markdown_it.common.normalize_url import normalizeLinkText
from markdown_it.token import Token

log = logging.getLogger("askhuman.renderers.parser")
T = TypeVar("T")

RUST = "markdown-it-pyrs"
PYTHON = "markdown-it-py"
MAX_DEPTH = 16
"""Deepest Rust tree trusted to equal markdown-it-py's: below its ``maxNesting`` (20)."""
_EMPTY_ITEM = re.compile(r"\n[ \t>]*(?:[-*+]|\d{1,9}[.)])[ \t]*(?=\n|$)")
_TABLE_RULE = re.compile(r"\n[ \t>]*[|:\- \t]*\|[|:\- \t]*(?=\n|$)")
"""Both start with a newline (``rust_may_differ`` puts one first): a literal is fast."""
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_TILDES = re.compile(r"~~~+")
_ODD_SPACE = re.compile(r"[^\S \t\n\r\f\v]")
_ODD_HOST = re.compile(r"(?i:mailto:|//)[^\s/?#<>]*[^\x00-\x7f]")
_NEAR_DELIMITER = re.compile(r"[^\x00-\x7f](?=[*_~])|(?<=[*_~])[^\x00-\x7f]")
_QUOTE_GOES_ON = re.compile(r">[^\n]*\n[ \t]*\S")
"""A line with a ``>`` and then a line that is not blank: a quote can have a lazy line."""
_QUOTE_MARKS = re.compile(r"(?:[ \t]*(?:[-*+]|\d{1,9}[.)])(?=[ \t]))*[ \t>]*")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_RULE_LINE = re.compile(r"[ \t>]*[|:\- \t]*\|[|:\- \t]*")
_ENDS_BLOCK_ABOVE = re.compile(
    r"\n[ \t>]*+(?=[\d:-])(?:(\d{1,9})[.)](?=[ \t\n]|$)|(:?)-+(:?)[ \t]*(?=\n|$))")
"""An ordered item's line, or a line of dashes (a colon at either end: a table rule).
Under a line, an item numbered other than 1 ends a quote or a table above it for
markdown-it-py, while markdown-it.rs keeps it in them (a lazy line, a row); dashes
under a line with a ``|`` are a one-column table for markdown-it-py, a setext heading
for markdown-it.rs; a one-column rule with a colon and no ``|`` makes a table for
markdown-it.rs only."""
_ITEM_START = re.compile(r"[ \t>]*(?:[-*+]|\d{1,9}[.)])[ \t]")
"""A list item's first line: a table rule under it is a lazy line to Python only."""
_BLANK_SPAN = re.compile(r"`(?:[ \t\n]{3,}`|[ \t]{2,}\n)")
"""A code span of blanks only (three or more, or two and a line break)."""
_TICK_RUN = re.compile(r"`+")
_LONG_TICKS = re.compile(r"``+")
_INDENTED_LINE = re.compile(r"\n[ \t]+\S")


def rust_may_differ(source: str) -> bool:
    """Where markdown-it.rs 0.6 and markdown-it-py 4 read a body differently, so ``read``
    uses Python. Found by comparing the two on random Markdown
    (``tests/renderers/test_parsers.py``): a control character (``links_in`` reads
    uncleaned text, and a NUL ends a link's target in Rust only); an empty list item,
    which Rust reads as a quote's lazy continuation; a table whose head has no ``|``,
    which only Rust accepts, or whose head is a list item's first line (a lazy line to
    Python); the block and code-span cases of ``_blocks_differ`` and
    ``_code_spans_differ``; a run of 3+ tildes inside a line, which the two pair
    differently for strikethrough; whitespace beyond ASCII (no-break, ideographic), which
    Python's ``str.strip`` removes at line and cell edges; a link to a non-ASCII host,
    which only Python turns into punycode; and a symbol (``€``, ``✅``, ``¬``) next to
    ``*``, ``_`` or ``~`` (CommonMark 0.31 counts symbols as punctuation for emphasis,
    markdown-it.rs follows 0.30); a code span in a body with a quote and a line that
    starts with blanks (a quote's lazy line keeps them in Python only); and a table in a
    body with a quote (the two disagree on whether a quote's lazy line heads a table).
    Letters, CJK and punctuation next to a delimiter, and non-ASCII paths, stay on the
    fast path; an ASCII body takes a few regex scans."""
    lines = "\n" + source
    if _CONTROL.search(source) or _EMPTY_ITEM.search(lines):
        return True
    for run in _TILDES.finditer(source):  # after text on its line: not a ``~~~`` fence
        if source[source.rfind("\n", 0, run.start()) + 1:run.start()].strip(" \t>"):
            return True
    for rule in _TABLE_RULE.finditer(lines):
        start = rule.start()  # the newline before the rule; the head line ends there
        head = lines[lines.rfind("\n", 0, start) + 1:start]
        if start and "-" in rule.group() and ("|" not in head or _ITEM_START.match(head)):
            return True
    if _QUOTE_GOES_ON.search(source) and _lazy_quote_differs(lines):
        return True
    if _blocks_differ(source, lines) or _code_spans_differ(source):
        return True
    if source.isascii():
        return False
    if _ODD_SPACE.search(source) or _ODD_HOST.search(source):
        return True
    return any(unicodedata.category(m.group())[0] == "S"
               for m in _NEAR_DELIMITER.finditer(source))


def _blocks_differ(source: str, lines: str) -> bool:
    """Block structure the two parsers end differently: an ordered item not numbered 1
    under a quote's or a table's line, a ``|`` line over a line of dashes, a one-column
    rule with a colon (all three ``_ENDS_BLOCK_ABOVE``), and an unclosed fence whose
    last line holds only blanks (markdown-it.rs keeps it in the code, markdown-it-py
    drops it)."""
    if "|" in source or ">" in source or "-:" in source or ":-" in source:
        for line in _ENDS_BLOCK_ABOVE.finditer(lines):
            number, left, right = line.groups()
            if left or right:
                return True
            above = _line_before(lines, line.start())
            if ("|" in above) if number is None else (
                    int(number) != 1 and above.strip(" \t>") != ""):
                return True
    last = source[source.rfind("\n") + 1:]
    return bool(last) and not last.strip(" \t") and ("```" in source or "~~~" in source)


def _line_before(lines: str, newline: int) -> str:
    """The line that ends at ``newline`` (an index into ``lines``)."""
    return lines[lines.rfind("\n", 0, newline) + 1:newline]


def _code_spans_differ(source: str) -> bool:
    """Code spans the two read differently: one holding only blanks (markdown-it.rs
    strips one at each end even then, or reads two and a line break as a hard break),
    after a ``[``, a run of two or more backticks inside a line (markdown-it.rs,
    scanning the link's text, loses the pairs of spans after it); and a span that goes
    on to a line starting with blanks (markdown-it.rs drops them, as CommonMark does for
    a paragraph's lines; markdown-it-py keeps them in the span)."""
    if "`" not in source:
        return False
    if _BLANK_SPAN.search(source):
        return True
    if "[" in source and any(source[source.rfind("\n", 0, run.start()) + 1:run.start()]
                             .strip(" \t>") for run in _LONG_TICKS.finditer(source)):
        return True  # a run of two or more backticks inside a line (not a fence's)
    return _INDENTED_LINE.search(source) is not None and any(
        _span_goes_on_indented(paragraph) for paragraph in source.split("\n\n")
        if "`" in paragraph and ("\n " in paragraph or "\n\t" in paragraph))


def _span_goes_on_indented(paragraph: str) -> bool:
    """Whether a line starting with blanks begins while a backtick run of an earlier
    line waits for its closing run (CommonMark pairs runs of equal length; a run that
    never closes is counted as open too, which only sends more bodies to Python)."""
    opened = 0  # the length of the run waiting for its match, 0 when none
    for number, line in enumerate(paragraph.split("\n")):
        if opened and number and line[:1] in (" ", "\t") and line.strip():
            return True
        for run in _TICK_RUN.finditer(line):
            length = len(run.group())
            if not opened:
                opened = length
            elif length == opened:
                opened = 0
    return False


def _lazy_quote_differs(lines: str) -> bool:
    """A quote's lazy line (a line quoted less deep than one above it in the same run of
    lines) that is a table's rule, or that starts with blanks in a body with a code
    span: markdown-it-py reads the first as a table with ``>`` in a cell and keeps the
    blanks of the second in the span; markdown-it.rs does neither. ``lines`` is the
    body after a newline; only the runs from a quote's line to a blank line are read."""
    code = "`" in lines
    done = 0
    for start in _quote_lines(lines):
        if start < done:
            continue
        blank = _BLANK_LINE.search(lines, start)
        done = blank.start() if blank else len(lines)
        deepest = 0
        for line in lines[start + 1:done].split("\n"):
            marks = _QUOTE_MARKS.match(line).group()  # type: ignore[union-attr]
            depth = marks.count(">")
            rule = depth != deepest and "-" in line and _RULE_LINE.fullmatch(line) is not None
            if deepest and (rule or (depth < deepest and code and (
                    line[:1] in " \t" or marks.endswith("  ") or "\t" in marks))):
                return True
            deepest = max(deepest, depth)
    return False


def _quote_lines(lines: str) -> Iterator[int]:
    """Where each line that opens or goes on with a quote starts (its newline): found
    from each ``>``, which is faster than a regex tried at every line."""
    at = lines.find(">")
    while at != -1:
        start = lines.rfind("\n", 0, at)
        if _QUOTE_MARKS.match(lines, start + 1).end() > at:  # type: ignore[union-attr]
            yield start
        end = lines.find("\n", at)
        at = -1 if end == -1 else lines.find(">", end)


class Node(Protocol):
    """One node of the tree (a markdown-it-pyrs ``Node``, or ``_PyNode``)."""

    @property
    def name(self) -> str: ...
    @property
    def children(self) -> Sequence[Node]: ...
    @property
    def meta(self) -> Mapping[str, Any]: ...
    @property
    def srcmap(self) -> tuple[int, int] | None: ...


class TooDeep(Exception):
    """Raised by a walk that went past ``Tree.depth_limit``: read again with Python."""


class Tree:
    """A parsed body: its ``root``, and what markdown-it-py's tokens say that the Rust
    tree leaves to the reader (an image's label as written, an autolink's text)."""

    depth_limit = 10**6

    def __init__(self, root: Node, source: str) -> None:
        self.root = root
        self.source = source

    def label(self, image: Node) -> str:
        return str(image.meta.get("label", ""))

    def autolink_text(self, autolink: Node) -> str:
        return "".join(str(c.meta.get("content", "")) for c in autolink.children)


class _RustTree(Tree):
    depth_limit = MAX_DEPTH

    @cached_property
    def _bytes(self) -> bytes:
        return self.source.encode()

    def label(self, image: Node) -> str:
        """The label's source: from after ``![`` to the first ``]`` after its last child
        (only blanks can follow the last child). ``srcmap`` counts UTF-8 bytes."""
        span = image.srcmap
        if span is None:
            return ""
        data = self._bytes
        tail = image.children[-1].srcmap if image.children else None
        end = data.find(b"]", tail[1] if tail else span[0] + 2, span[1])
        return data[span[0] + 2:end if end != -1 else span[0] + 2].decode(errors="replace")

    def autolink_text(self, autolink: Node) -> str:
        """markdown-it-py shows an autolink's address decoded (percent-escapes, punycode)."""
        return normalizeLinkText(super().autolink_text(autolink))


# ---------------------------------------------------------------- markdown-it-py → tree


class _PyNode:
    """A markdown-it-py token as a tree node of markdown-it.rs's shape."""

    __slots__ = ("children", "meta", "name", "srcmap")

    def __init__(self, name: str, meta: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.meta: Mapping[str, Any] = meta or {}
        self.children: list[_PyNode] = []
        self.srcmap: tuple[int, int] | None = None


_NAMES = {"th": "tcell", "td": "tcell", "tr": "trow", "s": "strikethrough"}
_PY = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def _py_meta(tok: Token) -> dict[str, Any]:
    if tok.type == "ordered_list_open":
        return {"start": int(str(tok.attrs.get("start", 1)))}
    if tok.type == "link_open":
        return {"url": str(tok.attrs.get("href", ""))}
    if tok.type == "image":
        return {"url": str(tok.attrs.get("src", "")), "label": tok.content}
    return {"content": tok.content}


def _py_nodes(tokens: Sequence[Token], root: _PyNode) -> _PyNode:
    stack = [root]
    for tok in tokens:
        if tok.nesting == -1:
            stack.pop()
            continue
        if tok.type == "inline":
            _py_nodes(tok.children or [], stack[-1])
            continue
        if tok.type == "paragraph_open" and tok.hidden:
            stack.append(stack[-1])  # a tight list's paragraph: its inlines join the item
            continue
        name = tok.type[:-5] if tok.nesting == 1 else tok.type
        if tok.type == "link_open" and tok.markup == "autolink":
            name = "autolink"
        node = _PyNode(_NAMES.get(name, name), _py_meta(tok))
        stack[-1].children.append(node)
        if tok.type == "code_inline":
            node.children.append(_PyNode("text", {"content": tok.content}))
        elif tok.type == "image":
            _py_nodes(tok.children or [], node)
        if tok.nesting == 1:
            stack.append(node)
    return root


def parse_python(source: str) -> Tree:
    return Tree(_py_nodes(_PY.parse(source), _PyNode("root")), source)


# ---------------------------------------------------------------- markdown-it-pyrs

PARSERS: dict[str, Callable[[str], Tree]] = {}
try:
    import markdown_it_pyrs
except ImportError:  # no wheel for this platform or Python: the Python parser alone
    pass
else:
    _RS = markdown_it_pyrs.MarkdownIt("zero").enable_many([
        "blockquote", "code", "fence", "heading", "hr", "lheading", "list", "paragraph",
        "reference", "autolink", "backticks", "emphasis", "entity", "escape", "image",
        "link", "newline", "strikethrough", "table",
    ])  # markdown-it-py's "commonmark" rules less html_block/html_inline

    def parse_rust(source: str) -> Tree:
        return _RustTree(_RS.tree(source), source)

    PARSERS[RUST] = parse_rust
PARSERS[PYTHON] = parse_python
_active = next(iter(PARSERS))


def active() -> str:
    """The parser ``read`` tries first (the Rust one when its wheel is installed)."""
    return _active


@contextmanager
def using(name: str) -> Iterator[None]:
    """Read with ``name`` first for a while (benchmarks and the tests that compare)."""
    global _active
    before, _active = _active, name
    try:
        yield
    finally:
        _active = before


def first_tree(source: str, end: int | None = None) -> Tree:
    """The tree of ``source`` from the active parser, or markdown-it-py's when the two
    may read it differently or the Rust parser fails. A walk that meets ``TooDeep`` in
    it must start again on ``parse_python(source)`` (``read`` does).

    With ``end`` (just after a newline), the Rust parser reads only ``source[:end]``:
    the tree's ``source`` is then that prefix, and every top-level block but its last
    is the whole body's too (``markdown._Units``). markdown-it-py always reads it all.
    Only that prefix is then screened (``rust_may_differ``): its final blocks are what
    markdown-it-py makes of the prefix alone, whatever follows, so a construct further
    on matters only to the later parse that reads it (the whole body screened once
    cost ~0.17 ms of an 8,000-character body's first render).
    """
    parse = PARSERS[_active]
    if parse is parse_python:
        return parse_python(source)
    if end is not None and end < len(source):
        head = source[:end]
        if rust_may_differ(head):
            return parse_python(source)
        try:  # a prefix the Rust parser fails on is no reason to read the whole with Python
            return _parse_or_raise(parse, head)
        except _ParserFailed:
            pass
    if rust_may_differ(source):
        return parse_python(source)
    try:
        return _parse_or_raise(parse, source)
    except _ParserFailed as failed:
        log.warning("markdown-it-pyrs failed; parsing with markdown-it-py",
                    extra={"error": str(failed), "chars": len(source)}, exc_info=True)
        return parse_python(source)


class _ParserFailed(Exception):
    """The Rust parser raised or panicked (its type name is the message)."""


def _parse_or_raise(parse: Callable[[str], Tree], source: str) -> Tree:
    try:
        return parse(source)
    except BaseException as exc:  # a Rust panic is a BaseException (pyo3's PanicException)
        if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
            raise
        raise _ParserFailed(type(exc).__name__) from exc


def read(source: str, walk: Callable[[Tree], T]) -> T:
    """``walk`` the tree of ``source``, parsed by the active parser; again on
    markdown-it-py's tree when the Rust one is too deep to trust or the parser fails."""
    tree = first_tree(source)
    try:
        return walk(tree)
    except TooDeep:
        if type(tree) is Tree:  # markdown-it-py's already: its depth_limit is never met
            raise
        return walk(parse_python(source))
