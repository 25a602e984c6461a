"""Every relative link in README.md and docs/ (its subfolders too) resolves.

The README is the front page and docs/ holds the manual, one file per topic; a section
renamed or moved must not leave a dead link behind. A link resolves when its file (or
folder) exists inside the repository and, if it has a ``#anchor``, the target Markdown
file has a heading with that GitHub-style slug. Links are found by markdown-it (the
parser the renderers already use), so links in code blocks are ignored and reference
links, autolinks and images are seen as GitHub sees them.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_NOT_SLUG = re.compile(r"[^\w\- ]")


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def _tokens(path: Path) -> list[Token]:
    return _parser().parse(path.read_text(encoding="utf-8"))


def links(path: Path) -> list[str]:
    """The link and image targets of one Markdown file, in order."""
    found: list[str] = []
    for token in _tokens(path):
        for child in token.children or []:
            if child.type == "link_open":
                found.append(str(child.attrGet("href") or ""))
            elif child.type == "image":
                found.append(str(child.attrGet("src") or ""))
    return found


def slug(text: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return _NOT_SLUG.sub("", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of one Markdown file (repeats get ``-1``, ``-2``, as on GitHub)."""
    tokens = _tokens(path)
    seen: dict[str, int] = {}
    result: set[str] = set()
    for i, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        inline = tokens[i + 1]
        text = "".join(c.content for c in inline.children or []
                       if c.type in ("text", "code_inline"))
        base = slug(text)
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """The relative links of ``path`` that do not resolve, each with the reason."""
    problems: list[str] = []
    for href in links(path):
        if not href or _SCHEME.match(href) or href.startswith("//"):
            continue  # web and mail links are not checked here
        target_part, _, fragment = href.partition("#")
        target = (path.parent / unquote(target_part)).resolve() if target_part else path
        if not target.is_relative_to(root.resolve()):
            problems.append(f"{href}: points outside the repository")
            continue
        if not target.exists():
            problems.append(f"{href}: {target.relative_to(root.resolve())} does not exist")
            continue
        if fragment:
            if target.suffix != ".md" or not target.is_file():
                problems.append(f"{href}: an anchor into something that is not Markdown")
            elif unquote(fragment) not in anchors(target):
                problems.append(f"{href}: no heading #{fragment} in {target.name}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_resolve(page: Path) -> None:
    assert broken_links(page) == []


def test_docs_are_there_and_linked_from_the_readme() -> None:
    """The manual's topics each have a page, and the front page links every page."""
    topics = {"slack", "feishu", "configuration", "policy", "tools", "api", "operations",
              "security"}
    assert topics <= {p.stem for p in DOCS.glob("*.md")}
    linked = {(ROOT / unquote(h.partition("#")[0])).resolve()
              for h in links(ROOT / "README.md") if h and not _SCHEME.match(h)}
    assert [p.name for p in sorted(DOCS.glob("*.md")) if p.resolve() not in linked] == []


def test_slugs_match_github() -> None:
    assert slug("3. Long connection or HTTP callbacks?") == "3-long-connection-or-http-callbacks"
    assert slug("1. Create the app from manifest.yml") == "1-create-the-app-from-manifestyml"
    assert slug("Feishu / Lark") == "feishu--lark"
    assert (slug("Approval policy: quorum, veto, sign-off per group, reasons")
            == "approval-policy-quorum-veto-sign-off-per-group-reasons")


def test_the_check_finds_dead_links(tmp_path: Path) -> None:
    """The checker itself: a missing file, a missing heading and a link out of the tree."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\n## Same\n\n## Same\n", encoding="utf-8")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/a.md) [ok](docs/a.md#same-1) [ok](#top) [web](https://example.com)\n"
        "[gone](docs/b.md) [no heading](docs/a.md#other) [out](../x.md)\n\n"
        "```\n[in code](nowhere.md)\n```\n\n# Top\n",
        encoding="utf-8",
    )
    assert broken_links(page, root=tmp_path) == [
        "docs/b.md: docs/b.md does not exist",
        "docs/a.md#other: no heading #other in a.md",
        "../x.md: points outside the repository",
    ]
