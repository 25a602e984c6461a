"""One Markdown tree → text lines in a platform's dialect, one unit per top-level block.

The walk over ``renderers.parser``'s tree that ``renderers.markdown`` memoizes and
splits: which constructs are kept (emphasis, code, links to safe schemes, lists, quotes,
tables as lines, fences) and how each platform spells them (``Dialect``). Everything
the model wrote is escaped here, text run by text run; a link is real only for a safe
scheme whose text names no other host (``renderers.links``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from urllib.parse import quote

from renderers import i18n
from renderers.escapes import (
    FEISHU_LINK,
    WORD_JOINER,
    feishu_escape,
    is_safe_url,
    plain,
    slack_escape,
)
from renderers.links import misleading_host
from renderers.parser import Node, TooDeep, Tree

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
class Walk:
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

    def take_unit(self) -> str:
        """The lines of the block just walked, as one unit ("" when blank); the walk
        goes on with the next top-level block."""
        unit = "\n".join(self.lines)
        self.lines, self.fresh_item = [], False
        return unit if unit.strip() else ""

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


def walk_block(w: Walk, node: Node, depth: int) -> None:
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


def _blocks(w: Walk, nodes: Sequence[Node], depth: int) -> None:
    """A container's children; inlines directly in it (a tight list's item) are a line."""
    run: list[Node] = []
    for node in nodes:
        if node.name in _INLINE:
            run.append(node)
            continue
        if run:
            w.emit(_inline(run, w.d, w.tree, depth))
            run = []
        walk_block(w, node, depth)
    if run:
        w.emit(_inline(run, w.d, w.tree, depth))


def tree_units(tree: Tree, d: Dialect) -> Iterator[str]:
    """Every unit of a tree (markdown-it-py's, after a Rust tree was too deep)."""
    walk = Walk(d, tree, [], [])
    for node in tree.root.children:
        walk_block(walk, node, 1)
        unit = walk.take_unit()
        if unit:
            yield unit
