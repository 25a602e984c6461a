"""A body's first render does only the work it shows (issue 22, ``benchmarks/render.py``).

``markdown_chunks`` walks a body's blocks only as far as the chunks it keeps, and
remembers the walk per body; the post-checks search all strings at once; ``plain``
skips text with nothing to defuse; the ladder reads label sizes once. Each must give
exactly what the whole, one-at-a-time version gave: these tests hold them to an oracle
written the old way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from renderers import budget, checks, escapes, feishu, markdown, parser, slack, walker
from renderers.markdown import FEISHU, SLACK, Dialect, fit_chunks, markdown_chunks, split_units
from renderers.slack import message
from tests.renderers.cases import REQUESTS, STATES, make_card, max_card
from tests.renderers.strategies import BLOCKY, HOSTILE
from tests.renderers.test_parsers import CORPUS, PIECES

DEEP = "> " * 30 + "too deep"
"""Deeper than a Rust tree is trusted (``parser.MAX_DEPTH``): read again in Python."""


def _clear() -> None:
    markdown._markdown_units.cache_clear()


def whole(source: str, d: Dialect, limit: int, room: int) -> list[str]:
    """The old ``markdown_chunks``: every block walked, then split and fitted."""
    units = parser.read(markdown.clean(source), lambda tree: list(walker.tree_units(tree, d)))
    return fit_chunks(split_units(units, limit), room)


def lazy(source: str, d: Dialect, limit: int, room: int) -> list[str]:
    _clear()
    return markdown_chunks(source, d, limit, room)


BODIES = [*CORPUS, max_card().args.markdown or "", "p\n\n" * 3000, "para " * 2000,
          "\n\n".join(f"- item {i}\n\n  > q {i}" for i in range(300))]


@pytest.mark.parametrize("d", [SLACK, FEISHU], ids=["slack", "feishu"])
@pytest.mark.parametrize("room", [0, 30, 41, 300, 1500, 3000, 9000, 10**6])
def test_a_partial_walk_gives_the_chunks_of_a_whole_one(d: Dialect, room: int) -> None:
    for source in BODIES:
        for limit in (40, 3000):
            assert lazy(source, d, limit, room) == whole(source, d, limit, room), source[:80]


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(PIECES) | st.text(max_size=4), max_size=60).map("".join),
       st.integers(1, 400), st.integers(0, 600), st.booleans())
def test_random_bodies_and_budgets(source: str, limit: int, room: int, deep: bool) -> None:
    source = f"{source}\n\n{DEEP}\n\n{source}" if deep else source
    for d in (SLACK, FEISHU):
        assert lazy(source, d, limit, room) == whole(source, d, limit, room)




@contextmanager
def first_read(chars: int) -> Iterator[None]:
    """Parse bodies ``chars`` characters first (then twice as many, …), whatever a
    render shows."""
    before = markdown._first_read
    markdown._first_read = lambda shown: chars
    try:
        yield
    finally:
        markdown._first_read = before


@pytest.mark.parametrize("chars", [1, 5, 40, 300])
@pytest.mark.parametrize("d", [SLACK, FEISHU], ids=["slack", "feishu"])
def test_a_body_parsed_a_start_at_a_time_gives_what_one_parse_gives(
    d: Dialect, chars: int
) -> None:
    with first_read(chars):
        for source in BODIES:
            for room in (0, 41, 1500, 10**6):
                assert lazy(source, d, 3000, room) == whole(source, d, 3000, room), source[:80]
            _clear()
            assert markdown.markdown_units(source, d) == whole_units(source, d), source[:80]


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(BLOCKY) | st.sampled_from(PIECES) | st.text(max_size=3),
                max_size=80).map("".join),
       st.integers(1, 400), st.integers(0, 600), st.sampled_from([1, 2, 7, 30]))
def test_random_blocks_parsed_a_start_at_a_time(
    source: str, limit: int, room: int, chars: int
) -> None:
    """Fences, tables, setext headings, lazy lines and lists cut anywhere: a block the
    next lines may continue is never walked from a prefix."""
    with first_read(chars):
        for d in (SLACK, FEISHU):
            assert lazy(source, d, limit, room) == whole(source, d, limit, room)
            _clear()
            assert markdown.markdown_units(source, d) == whole_units(source, d)


@pytest.mark.skipif(parser.RUST not in parser.PARSERS, reason="no markdown-it-pyrs wheel here")
def test_the_first_render_of_a_long_body_parses_only_its_start() -> None:
    """A maximum card's first Slack render parses about what it shows (1,500 characters
    of 8,000); the decided card, which shows more, reads on from there."""
    import dataclasses

    card = max_card()
    body = markdown.clean(card.args.markdown or "")
    key = (card.args.markdown or "", SLACK, "en", parser.active())
    _clear()
    slack.render_request(card)
    held = markdown._markdown_units(*key)._held
    assert held is not None and not held.whole
    assert markdown.FIRST_READ <= len(held.tree.source) < len(body) // 2
    slack.render_request(dataclasses.replace(card, status="cancelled", message="gone"))
    assert markdown._markdown_units(*key)._next_block > 0
    assert markdown.markdown_units(card.args.markdown or "", SLACK) == whole_units(
        card.args.markdown or "", SLACK)


def test_a_body_too_deep_after_what_is_shown_renders_as_before() -> None:
    """The first render stops before the deep block; a later one reaches it and reads
    every unit again from markdown-it-py's tree: both are what a whole walk gave."""
    source = "\n\n".join(["**a** <!channel>"] * 50 + [DEEP] + ["[x](javascript:y)"] * 5)
    _clear()
    assert markdown_chunks(source, SLACK, 3000, 100) == whole(source, SLACK, 3000, 100)
    assert markdown_chunks(source, SLACK, 3000, 10**6) == whole(source, SLACK, 3000, 10**6)
    assert markdown.markdown_units(source, SLACK) == parser.read(
        markdown.clean(source), lambda tree: list(walker.tree_units(tree, SLACK)))


@pytest.mark.skipif(parser.RUST not in parser.PARSERS, reason="no markdown-it-pyrs wheel here")
@pytest.mark.parametrize("d", [SLACK, FEISHU], ids=["slack", "feishu"])
def test_a_body_the_parsers_read_differently_only_after_what_is_shown(d: Dialect) -> None:
    """Only the parsed start of a body is screened: the first render reads it with Rust;
    the rest, where the two parsers disagree, is read with markdown-it-py once a
    render shows it. Every render is what one whole read gives."""
    later = ["> q\n- ", "**✅ done** <!channel>", "head\n|---|", "[a](javascript:x)"]
    source = "\n\n".join(["**a** <!here> [b](https://example.com)"] * 120 + later)
    assert parser.rust_may_differ(source)
    _clear()
    assert markdown_chunks(source, d, 3000, 300) == whole(source, d, 3000, 300)
    held = markdown._markdown_units(source, d, "en", parser.active())._held
    assert held is not None and not held.whole and type(held.tree) is not parser.Tree
    assert markdown_chunks(source, d, 3000, 10**6) == whole(source, d, 3000, 10**6)
    assert markdown.markdown_units(source, d) == whole_units(source, d)


def test_the_walk_is_remembered_per_body_and_dialect() -> None:
    _clear()
    body, other = max_card().args.markdown or "", "# other\n\n@here <at id=all>"
    first = markdown_chunks(body, SLACK, 3000, 1500)
    key = (body, SLACK, "en", parser.active())
    walked = markdown._markdown_units(*key)._next_block
    assert 0 < walked < len(parser.first_tree(markdown.clean(body)).root.children)
    assert markdown_chunks(body, SLACK, 3000, 1500) == first  # same output twice
    assert markdown._markdown_units(*key)._next_block == walked  # and no more walking
    assert markdown_chunks(other, SLACK, 3000, 1500) == whole(other, SLACK, 3000, 1500)
    assert markdown_chunks(body, FEISHU, 4000, 1500) == whole(body, FEISHU, 4000, 1500)
    assert markdown_chunks(body, SLACK, 3000, 1500) == first  # no collision
    assert markdown.markdown_units(body, SLACK) == list(whole_units(body, SLACK))


def whole_units(source: str, d: Dialect) -> list[str]:
    return parser.read(markdown.clean(source), lambda tree: list(walker.tree_units(tree, d)))


def test_a_walk_whose_tree_was_let_go_parses_again_and_goes_on() -> None:
    _clear()
    bodies = [f"# body {i}\n\n" + "para @here\n\n" * 400 for i in range(markdown._KEPT_WALKS + 3)]
    firsts = [markdown_chunks(b, SLACK, 3000, 200) for b in bodies]
    held = markdown._markdown_units(bodies[0], SLACK, "en", parser.active())
    assert held._held is None and not held._finished  # the oldest let its tree go
    assert held._walker is None  # its walker held the tree too
    for body, first in zip(bodies, firsts, strict=True):
        assert first == whole(body, SLACK, 3000, 200)
        assert markdown_chunks(body, SLACK, 3000, 9000) == whole(body, SLACK, 3000, 9000)
        assert markdown.markdown_units(body, SLACK) == whole_units(body, SLACK)


def test_a_body_with_a_reference_definition_is_walked_whole_at_once() -> None:
    _clear()
    source = "[a]\n\n" + "text\n\n" * 100 + "[a]: https://example.com/\n"
    assert markdown_chunks(source, SLACK, 3000, 20) == whole(source, SLACK, 3000, 20)
    assert markdown._markdown_units(source, SLACK, "en", parser.active())._finished


# ---------------------------------------------------------------- whole cards


@pytest.mark.parametrize("name", list(REQUESTS))
@pytest.mark.parametrize("state", STATES)
def test_cards_render_the_same_cold_and_warm(name: str, state: str) -> None:
    card = make_card(name, state)
    _clear()
    cold = (slack.render_request(card), feishu.render_card(card))
    assert (slack.render_request(card), feishu.render_card(card)) == cold


def test_the_maximum_card_pending_then_decided() -> None:
    """The pending card shows the start of the body; the decided one (no options) more."""
    import dataclasses

    card = max_card()
    decided = dataclasses.replace(card, status="cancelled", message="gone")
    _clear()
    first = (slack.render_request(card), slack.render_request(decided))
    _clear()
    assert slack.render_request(decided) == first[1]
    assert slack.render_request(card) == first[0]


# ---------------------------------------------------------------- post-checks


def _old_displayed(obj: object) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() if k not in checks._NOT_DISPLAYED
                for s in _old_displayed(v)]
    if isinstance(obj, list):
        return [s for item in obj for s in _old_displayed(item)]
    return []


def _old_markdown(obj: object) -> list[str]:
    out: list[str] = []
    if isinstance(obj, dict):
        if obj.get("tag") in ("markdown", "lark_md") and isinstance(obj.get("content"), str):
            out.append(obj["content"])
        for value in obj.values():
            out += _old_markdown(value)
    elif isinstance(obj, list):
        for item in obj:
            out += _old_markdown(item)
    return out


def _verdict(check: Any, payload: object, allowed: tuple[str, ...]) -> str | None:
    try:
        check(payload, allowed)
    except checks.UnsafeOutputError as exc:
        return str(exc)
    return None


def _old_slack(payload: object, allowed: tuple[str, ...]) -> None:
    for text in _old_displayed(payload):
        for mention in allowed:
            text = text.replace(mention, "")
        hit = checks._SLACK_FORBIDDEN.search(text)
        if hit:
            raise checks.UnsafeOutputError(f"Slack mention syntax survived: {hit.group()!r}")


def _old_feishu(payload: object, allowed: tuple[str, ...]) -> None:
    for text in _old_displayed(payload):
        for mention in allowed:
            text = text.replace(mention, "")
        hit = checks._FEISHU_FORBIDDEN.search(text) or escapes.BROADCAST_WORD.search(text)
        if hit:
            raise checks.UnsafeOutputError(f"Feishu mention syntax survived: {hit.group()!r}")
    for content in _old_markdown(payload):
        for url in checks._FEISHU_MD_LINK.findall(content):
            if not escapes.is_safe_url(url):
                raise checks.UnsafeOutputError(f"Feishu link with unsafe scheme: {url!r}")


TEXT = st.lists(st.sampled_from([*HOSTILE, "<", "@", "at", "here", "\x00", " ", "\n", "a",
                                 "](", ")", "<@U1>"]), max_size=4).map("".join)
KEYS = st.sampled_from(["text", "content", "value", "url", "tag", "name", "elements"])
PAYLOADS = st.recursive(
    TEXT | st.sampled_from(["markdown", "lark_md"]) | st.integers(0, 2) | st.none(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(PAYLOADS, st.sampled_from([(), ("<@U1>",), ("<at id=ou_1></at>", "@here")]))
def test_the_post_checks_raise_exactly_as_one_string_at_a_time(
    payload: object, allowed: tuple[str, ...]
) -> None:
    assert _verdict(checks.check_slack, payload, allowed) == _verdict(_old_slack, payload, allowed)
    assert _verdict(checks.check_feishu, payload, allowed) == \
        _verdict(_old_feishu, payload, allowed)


def test_no_forbidden_pattern_reaches_across_the_join() -> None:
    """The join is safe because no pattern matches or looks past a NUL."""
    for pattern in (checks._SLACK_FORBIDDEN, checks._FEISHU_FORBIDDEN, escapes.BROADCAST_WORD):
        for left, right in (("<", "!here"), ("<", "at"), ("@", "here"), ("< ", "@")):
            assert pattern.search(left + checks._JOIN + right) is None
    assert checks._JOIN not in "".join(HOSTILE)


# ---------------------------------------------------------------- labels and the ladder


def _old_plain(text: str) -> str:
    out = escapes._FEISHU_TAG.sub("<\u2060", escapes._SLACK_ANGLE.sub("<\u2060",
                                                                       escapes.clean(text)))
    return escapes.defuse_broadcasts(out)


@given(st.lists(st.sampled_from([*HOSTILE, "\r", "\r\n", "\x85", "\u2066", "@", "<"])
                | st.text(max_size=6), max_size=8).map("".join))
@settings(max_examples=300, deadline=None, derandomize=True)
def test_plain_skips_only_text_it_would_not_change(text: str) -> None:
    escapes._plain_full.cache_clear()
    assert escapes.plain(text) == _old_plain(text)


def _old_total(obj: object) -> int:
    if isinstance(obj, dict):
        return sum(len(v) if k in ("text", "initial_value") and isinstance(v, str)
                   else _old_total(v) for k, v in obj.items())
    if isinstance(obj, list):
        return sum(_old_total(v) for v in obj)
    return 0


@pytest.mark.parametrize("name", [*REQUESTS, "max"])
def test_slack_text_count_and_ladder_floor_as_before(name: str) -> None:
    card = max_card() if name == "max" else make_card(name, "pending")
    out = slack.render_request(card)
    assert message.total_text_chars(out["blocks"]) == _old_total(out["blocks"])
    sizes = budget._LabelSizes(card.args)
    for step in (*message._LADDER, *feishu._LADDER):
        for per_option, stop in ((0, None), (50, 11000), (0, 25000)):
            assert budget.options_text_floor(card.args, step, per_option, stop, sizes) == \
                budget.options_text_floor(card.args, step, per_option, stop)

