"""Both Markdown parsers give the same output (``renderers.parser``).

markdown-it-pyrs (Rust) reads bodies first and markdown-it-py is the fallback, so every
renderer output must not depend on which one ran: the renderer test corpus, the
injection corpus, links that lie and a property over random Markdown are rendered
through both and compared. A subprocess without the Rust wheel proves the fallback.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from renderers import feishu, markdown, parser, slack, text
from renderers.links import honest_source, links_in
from renderers.markdown import FEISHU, SLACK, markdown_units
from tests.renderers import test_injection, test_links
from tests.renderers.cases import REQUESTS, STATES, make_card, max_card
from tests.renderers.strategies import BLOCKY, HOSTILE

ROOT = Path(__file__).resolve().parents[2]
HAS_RUST = parser.RUST in parser.PARSERS
needs_rust = pytest.mark.skipif(not HAS_RUST, reason="no markdown-it-pyrs wheel here")

TRICKY = [
    # what each parser might read differently, and what the walker must get right
    "===\n---\n", "Title\n=====\n\nSub\n---", "# h #\n\n#\n\n######## x",
    "- a\n- b\n\n  c\n- d\n  - e\n    1. f\n    2. g\n\n3) h\n4) i",
    "- \n- x\n\n1.\n2. y", "> q\n> - l\n>   > deeper\n\n> ```\n> code\n> ```",
    "| a | b |\n|:-|-:|\n| 1 |\n| 1 | 2 | 3 |\n| `|` | \\| |\n\n|x|\n|-|",
    "```py\ncode <!channel>\n```\n\n    indented @here\n\n~~~\n~~~", "---\n***\n___",
    "![**alt** `c` \\* ä](https://x.example/i.png 't') ![](u) ![a\n](u) ![a ](javascript:x)",
    "[![img](https://a.example/i)](https://b.example/) [x][r] ![y][r] [r]\n\n[r]: /u 'T'",
    "<http://xn--bcher-kva.example/%C3%A4> <a@b.c> <HTTP://X.Y/a b> <javascript:alert(1)>",
    "[a](https://x.io/p|q>r) [b](<x y>) [c](http://bücher.example/ä) [d](tel:1) [e]()",
    "[nul](\x002) [c](\x07)", "~~<!channel>~~~~<!channel>", "~~x~~~~y ~~a~~~~~b",
    "\\@here \\<!channel> &amp;#35; &#64;everyone &lt;at id=all&gt; @\u2060here &#x202e;x",
    "*a **b *c* d** e* _x_y_ __u__ ~~s~~ ~t~ ***bi*** **`code`** a*b*c 3*4*5",
    "line  \nbreak\\\nagain\nsoft", "a\tb\n\n\t- tab list", "&nbsp;&copy;&ngE;&Ascr;&bogus;",
    "> " * 30 + "too deep", "- " * 25 + "too deep", "*a " * 30 + "x" + " a*" * 30,
    "![```", "`` ` `` ``` `` ```", "[" * 50 + "x" + "]" * 50, "<!here|here> <@U1> <#C1|c>",
    "中文 **粗体**，*斜体*。「引用」 `代码`", "\u3000\u3000段落", "a\u00a0\n\u00a0b",
    "_i_¬ ✅_i_ **b**€ ~~s~~✅", "> `a\n b`", "- > `a\n b`", "1. > `a\n   b`", "> `a\n\tb`",
    ">`\n文\n `", "> a|b\n-|-", ">||\n-|-", "> > a|b\n> -|-", ">=\na||\n-|-",
    "[ẞ]\n\n[SS]: /v", "[ǅ]: /w\n\n[ǆ]", "中文 ![图 *片*](u) ![é](v)",
    # found by fuzzing block-heavy bodies (``test_random_blocks_read_the_same``)
    ">b\n2) d", "a||\n-|-\n2) o", "- x\n  >b\n  2) d", "```\ny\n ", "~~~\ny\n\t", "|q\n--",
    "q|\n--", "l\n-:", "- a\n- |#\n-|-", "`  \n`", "`   `", "a `    ` b", "[`>``>`c`",
    "[`a``b`c`", "a\nb```\n    ```\nc",
    *(lie for lie, _, _ in test_links.LIES), *test_links.HONEST, *HOSTILE,
    *test_injection.CORPUS, test_injection.BODY,
]
CORPUS = [*TRICKY, *(REQUESTS[name].get("markdown") or "" for name in REQUESTS)]


def _clear() -> None:
    markdown._markdown_units.cache_clear()


def outputs(source: str) -> dict[str, Any]:
    """Everything a body becomes: Slack and Feishu units, its links, its plain text."""
    return {
        "slack": markdown_units(source, SLACK), "feishu": markdown_units(source, FEISHU),
        "links": links_in(source), "honest": honest_source(source, lambda h: f"[to {h}]"),
    }


def through_each(fn: Callable[[], Any]) -> Iterator[tuple[str, Any]]:
    for name in parser.PARSERS:
        with parser.using(name):
            _clear()
            yield name, fn()
    _clear()


def assert_same(fn: Callable[[], Any]) -> None:
    results = dict(through_each(fn))
    python = results.pop(parser.PYTHON)
    for name, got in results.items():
        assert got == python, name


def test_the_rust_parser_reads_first_when_its_wheel_is_installed() -> None:
    assert parser.active() == (parser.RUST if HAS_RUST else parser.PYTHON)
    assert list(parser.PARSERS)[-1] == parser.PYTHON


@needs_rust
@pytest.mark.parametrize("source", CORPUS, ids=range(len(CORPUS)))
def test_corpus_renders_the_same_through_both_parsers(source: str) -> None:
    assert_same(lambda: outputs(source))


@needs_rust
@pytest.mark.parametrize("name", list(REQUESTS))
@pytest.mark.parametrize("state", STATES)
def test_whole_cards_render_the_same_through_both_parsers(name: str, state: str) -> None:
    card = make_card(name, state)
    assert_same(lambda: (slack.render_request(card), feishu.render_card(card),
                         text.render_text(card)))


@needs_rust
def test_the_maximum_card_renders_the_same_through_both_parsers() -> None:
    card = max_card()
    assert_same(lambda: (slack.render_request(card), feishu.render_card(card)))


PIECES = [*HOSTILE, "**", "*", "_", "~~", "[", "]", "(", ")", "![", "](", "<", ">", "`",
          "\\", "\n", "\n\n", "  \n", "> ", "- ", "1. ", "    ", " ", "## ", "---\n", "===\n",
          "|", "|---|", "&amp;", "&#35;", "https://good.example.com", "evil.example.net",
          "<a@b.c>", "[r]: /u\n", "[r]", "@", "here", "é", "中", "✅", "\u00a0", "\t", "x"]


EXAMPLES = int(os.environ.get("ASKHUMAN_PARSER_EXAMPLES", "150"))


@needs_rust
@settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 150,
          suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(PIECES) | st.text(max_size=4), max_size=40).map("".join))
def test_random_markdown_renders_the_same_through_both_parsers(source: str) -> None:
    """Fixed examples in the suite (a new difference must not fail an unrelated change);
    explore with ``ASKHUMAN_PARSER_EXAMPLES=5000`` and add what differs to
    ``parser.rust_may_differ``. 18,000 random bodies passed when this was written."""
    assert_same(lambda: outputs(source))


@needs_rust
@settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 150,
          suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(BLOCKY) | st.sampled_from(PIECES) | st.text(max_size=3),
                max_size=40).map("".join))
def test_random_blocks_read_the_same(source: str) -> None:
    """Fences, tables, setext headings, quotes' lazy lines and lists mixed: where the
    two parsers end blocks differently is sent to Python. 30,000 random bodies passed
    when this was written (0.2 % differed before ``_blocks_differ`` and
    ``_code_spans_differ``)."""
    assert_same(lambda: outputs(source))


@needs_rust
@pytest.mark.parametrize("test", [
    test_injection.test_slack_keeps_corpus_visible_and_inert,
    test_injection.test_feishu_keeps_corpus_visible_and_inert,
    test_injection.test_text_keeps_corpus_visible,
    test_injection.test_long_body_splits_within_section_limit,
    test_injection.test_untrusted_decider_id_is_not_a_mention,
], ids=lambda t: t.__name__)
def test_injection_tests_hold_on_the_fallback_too(test: Callable[[], None]) -> None:
    """The injection suite runs on the Rust parser; here it runs on markdown-it-py."""
    with parser.using(parser.PYTHON):
        _clear()
        test()
        for fragment in test_injection.CORPUS:
            test_injection.test_each_fragment_alone_in_markdown(fragment)
    _clear()


def test_what_the_parsers_disagree_on_goes_to_python() -> None:
    assert parser.rust_may_differ("a\u00a0b") and parser.rust_may_differ("\u3000x")
    assert parser.rust_may_differ("**✅ done**") and parser.rust_may_differ("_x_€")
    assert not parser.rust_may_differ("**重要**：中文 *é* ~~ü~~ — “q” 。")
    assert parser.rust_may_differ("[a](\x002)") and parser.rust_may_differ("> q\n- ")
    assert parser.rust_may_differ("head\n|---|") and not parser.rust_may_differ("Title\n---")
    assert parser.rust_may_differ("~~x~~~~y") and not parser.rust_may_differ("> ~~~\n> x\n> ~~~")
    assert not parser.rust_may_differ("plain\ttext\r\n| a |\n|---|")
    # an ordered item other than 1 under a quote's or a table's line, not elsewhere
    assert parser.rust_may_differ(">b\n2) d") and parser.rust_may_differ("a|b\n-|-\n3. o")
    assert not parser.rust_may_differ(">b\n1) d") and not parser.rust_may_differ("b\n2) d")
    assert not parser.rust_may_differ(">b\n\n2) d")
    # a one-column table rule: dashes under a ``|`` line, or a colon
    assert parser.rust_may_differ("|q\n--") and parser.rust_may_differ("l\n:-:")
    assert not parser.rust_may_differ("x\n---")
    # an unclosed fence ending in blanks; code spans of blanks; `` after [; a span
    # that goes on to an indented line
    assert parser.rust_may_differ("```\ny\n ") and not parser.rust_may_differ("```\ny\n \n")
    assert parser.rust_may_differ("`   `") and not parser.rust_may_differ("` ` `  `")
    assert parser.rust_may_differ("[`a``b`c`") and not parser.rust_may_differ("[x]\n```\nc\n```")
    assert parser.rust_may_differ("a `b\n  c`") and not parser.rust_may_differ("- `a` b\n  - c")


class PanicException(BaseException):
    """What pyo3 raises when Rust code panics (matched by name, like the real one)."""


@needs_rust
def test_a_rust_panic_falls_back_to_python(monkeypatch: pytest.MonkeyPatch,
                                           caplog: pytest.LogCaptureFixture) -> None:
    def panics(source: str) -> parser.Tree:
        raise PanicException("index out of bounds")

    monkeypatch.setitem(parser.PARSERS, parser.RUST, panics)
    _clear()
    with caplog.at_level(logging.WARNING, "askhuman.renderers.parser"):
        units = markdown_units("**b** <!channel>", SLACK)
    _clear()
    assert units == ["*b* &lt;!channel&gt;"]
    assert "markdown-it-pyrs failed" in caplog.text


def test_other_base_exceptions_are_not_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(source: str) -> parser.Tree:
        raise KeyboardInterrupt

    monkeypatch.setitem(parser.PARSERS, parser.RUST, interrupted)
    with parser.using(parser.RUST), pytest.raises(KeyboardInterrupt):
        parser.read("x", lambda tree: tree)


_FALLBACK = """
import json, sys
sys.modules["markdown_it_pyrs"] = None  # the import fails, as without a wheel
from renderers import parser
from tests.renderers.test_parsers import CORPUS, outputs
print(json.dumps({"active": parser.active(), "parsers": list(parser.PARSERS),
                  "outputs": [outputs(s) for s in CORPUS]}))
"""


def test_without_the_wheel_markdown_it_py_renders_the_same() -> None:
    run = subprocess.run([sys.executable, "-c", _FALLBACK], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    got = json.loads(run.stdout)
    assert got["active"] == parser.PYTHON and got["parsers"] == [parser.PYTHON]
    here = json.loads(json.dumps([outputs(s) for s in CORPUS]))  # tuples → lists
    assert got["outputs"] == here
