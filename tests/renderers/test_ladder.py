"""The budget ladder skips steps that cannot fit, without changing what is rendered."""

from __future__ import annotations

import dataclasses
import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.askhuman.schema import AskHumanToolArgs
from renderers import budget, feishu, i18n, markdown, parser
from renderers.card import CardStatus, RequestCard
from renderers.slack import message as slack
from tests.renderers.cases import max_card


def _naive_ladder(steps: Any, args: Any, limit: int, per_option: int = 0,
                  options_shown: bool = True) -> Any:
    return iter(steps)


def _card(label: str, options: int, fields: int = 8) -> RequestCard:
    args = AskHumanToolArgs.model_validate({
        "question": "Pick", "markdown": "**body** " * 300,
        "fields": [
            {"name": f"f{f}", "label": "L", "type": "multi-select" if f % 2 else "select",
             "options": [{"value": f"v{o}", "label": f"{o} {label}"} for o in range(options)]}
            for f in range(fields)
        ],
    })
    return RequestCard(ref="r_1", args=args, agent_name="a")


CARDS = [
    max_card(),
    _card("x" * 190, 100),
    _card("AT&T &amp; <b> " * 12, 100),  # entities the truncation may back off
    _card("é" * 150, 60),  # multi-byte: Feishu counts bytes
    _card("", 100),
    _card("short", 5, fields=2),
]
DECIDED = [  # no options shown: every step is tried, the body may show more
    dataclasses.replace(max_card(), status="timeout", message="No answer in time"),
    dataclasses.replace(_card("x" * 190, 100), status="submitted", action_label="OK"),
]


@pytest.mark.parametrize("card", CARDS + DECIDED)
def test_skipping_steps_renders_the_same(
    card: RequestCard, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = slack.render_request(card), feishu.render_card(card)
    monkeypatch.setattr(slack, "ladder", _naive_ladder)
    monkeypatch.setattr(feishu, "ladder", _naive_ladder)
    assert (slack.render_request(card), feishu.render_card(card)) == fast


def test_the_floor_never_exceeds_what_is_rendered() -> None:
    for card in CARDS:
        for step in slack._LADDER:
            shown = slack.total_text_chars(slack._blocks(card, step))
            assert budget.options_text_floor(card.args, step) <= shown
        for step in feishu._LADDER:
            size = feishu.card_size(feishu._card(card, step))
            assert budget.options_text_floor(card.args, step, feishu._OPTION_BYTES) <= size


def test_a_max_size_card_skips_to_the_step_that_fits() -> None:
    steps = list(budget.ladder(slack._LADDER, max_card().args, slack.TOTAL_TEXT_CHARS))
    assert steps[0] == slack._LADDER[3]


# ------------------------------------------------ Feishu: measured before it is built

BODY_PIECES = [
    "## Heading\n\n",
    "Some **bold** and *italic* text with `code` and a [link](https://example.com/x).\n\n",
    "- item one\n- item two\n  - nested item\n\n",
    "| a | b |\n|---|---|\n| 1 | x |\n\n",
    "```\nprint(1)\n```\n\n",
    "> quoted line\n\n",
    "中文段落，含有一些文字和标点。\n\n",
    'Quotes "here" and \\back\\slashes\\ and a\ttab\n\n',
    "<at id=all></at> @all <!channel> noise\n\n",
    "x" * 300 + "\n\n",
    "[js](javascript:alert(1)) and AT&T &amp; &#42;\n\n",
    "one long line " * 30 + "\n\n",
]
LABEL_CHARS = ["x", "é", '"', "\\", "&", "中", "\t", "a&b;"]


@st.composite
def big_cards(draw: st.DrawFn) -> RequestCard:
    """Cards near and over Feishu's size limit: many long options, long bodies, labels
    and bodies that JSON escapes or UTF-8 makes longer, preselections in and out of
    the options a step shows, pending or decided."""
    fields = []  # mostly big: the steps near the limit are the ones worth checking
    for f in range(draw(st.one_of(st.integers(0, 2), st.integers(5, 8)))):
        count = draw(st.one_of(st.integers(1, 10), st.integers(20, 100)))
        label = draw(st.sampled_from(LABEL_CHARS)) * draw(
            st.one_of(st.integers(1, 20), st.integers(30, 200)))
        options = [{"value": f"v{o}", "label": f"{o} {label}"[:200]} for o in range(count)]
        multi = draw(st.booleans())
        field: dict[str, Any] = {
            "name": f"f{f}", "label": "L" * draw(st.integers(1, 100)),
            "type": "multi-select" if multi else "select", "options": options}
        if draw(st.booleans()):
            picked = options[draw(st.integers(0, count - 1))]["value"]
            field["default"] = [picked, "v0"] if multi else picked
        fields.append(field)
    body = "".join(draw(st.lists(st.sampled_from(BODY_PIECES), max_size=120)))[:8000]
    args = AskHumanToolArgs.model_validate({
        "title": draw(st.sampled_from([None, "A title"])),
        "question": "Q" * draw(st.integers(1, 1000)), "markdown": body or None,
        "fields": fields})
    status: CardStatus = draw(st.sampled_from(["pending", "pending", "submitted", "timeout"]))
    return RequestCard(ref="r_1", args=args, agent_name="a", status=status)


def _reference(card: RequestCard, step: budget.Budget) -> tuple[dict[str, Any], bool]:
    """A step built the plain way, and whether it fits: what ``_fitted`` must agree with."""
    built = feishu._card(card, step)
    fits = (feishu.card_size(built) <= feishu.MAX_BYTES
            and feishu.count_elements(built) <= feishu.MAX_ELEMENTS)
    return built, fits


def _check_steps(card: RequestCard) -> None:
    for step in feishu._LADDER:
        built, fits = _reference(card, step)
        whole = feishu._fitted(card, step, last=True)
        assert whole is not None
        assert whole == (built, feishu.card_size(built))  # the same card, its size exact
        tried = feishu._fitted(card, step, last=False)
        assert (tried is not None) == fits  # refused only when it would not fit


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(big_cards())
def test_feishu_steps_are_measured_exactly_and_refused_only_when_over(card: RequestCard) -> None:
    _check_steps(card)


def _random_card(rng: random.Random, question: int) -> RequestCard:
    fields = []
    for f in range(rng.randint(5, 8)):
        count = rng.randint(20, 100)
        label = rng.choice(LABEL_CHARS) * rng.randint(20, 200)
        options = [{"value": f"v{o}", "label": f"{o} {label}"[:200]} for o in range(count)]
        field: dict[str, Any] = {"name": f"f{f}", "label": "L" * rng.randint(1, 100),
                                 "type": rng.choice(["select", "multi-select"]),
                                 "options": options}
        if rng.random() < 0.5:
            picked = options[rng.randrange(count)]["value"]
            field["default"] = picked if field["type"] == "select" else [picked, "v0"]
        fields.append(field)
    body = "".join(rng.choice(BODY_PIECES) for _ in range(rng.randint(20, 120)))[:8000]
    args = AskHumanToolArgs.model_validate({"title": "T", "question": "Q" * question,
                                            "markdown": body, "fields": fields})
    return RequestCard(ref="r_1", args=args, agent_name="a")


@pytest.mark.parametrize("seed", range(12))
def test_random_cards_tuned_to_the_limit(seed: int) -> None:
    """Random big cards whose question is tuned so that a step's plain build is within
    a few bytes of the limit (each question character is one byte): where a wrong
    count or a loose proof would refuse a card that fits, or keep one that does not."""
    for step in feishu._LADDER[1:4]:
        low, high = 1, 1000  # the question length at which this step stops fitting
        while low < high:
            middle = (low + high) // 2
            rng = random.Random(seed)
            built = feishu._card(_random_card(rng, middle), step)
            if feishu.card_size(built) > feishu.MAX_BYTES:
                high = middle
            else:
                low = middle + 1
        for length in range(max(1, low - 3), min(1000, low + 3) + 1):
            _check_steps(_random_card(random.Random(seed), length))


@pytest.mark.parametrize("card", CARDS)
def test_feishu_steps_of_the_known_cards(card: RequestCard) -> None:
    _check_steps(card)


def test_a_max_card_is_refused_from_the_start_of_its_body() -> None:
    """The max card's first step built is over only with its body: it is refused after
    less of the body than that step shows, and the step that fits walks no further."""
    card = max_card()
    body = card.args.markdown or ""
    markdown._markdown_units.cache_clear()  # a first render of this body
    assert feishu._fitted(card, feishu._LADDER[2], last=False) is None
    units = markdown._markdown_units(body, markdown.FEISHU, i18n.current_locale(),
                                     parser.active())
    walked = sum(map(len, units.units))
    assert 0 < walked < feishu._LADDER[2].body - 500
    assert feishu._fitted(card, feishu._LADDER[3], last=False) is not None
    assert sum(map(len, units.units)) == walked  # 1,500 characters were there already


@pytest.mark.parametrize("text", [
    "", "plain", "a\nb", 'say "hi"', "back\\slash", "tab\there", "é", "中文\n", "\u2028",
    "…", "\x7f", "a\x1fb",
])
def test_json_bytes_is_what_json_writes(text: str) -> None:
    assert markdown.json_bytes(text) == len(json.dumps(text, ensure_ascii=False).encode())


def test_a_body_cut_right_at_the_room_left_is_judged_right() -> None:
    """The room a step leaves swept byte by byte across the end of its body (a longer
    question leaves less), with entities where ``fit_chunks`` cuts the body: the proof
    may count only what it is sure to keep (``FIT_LOSS``)."""
    base = max_card()
    step = feishu._LADDER[2]
    body = "".join(f"words-and-more-words {n}\n\n" for n in range(400))  # "-" is "&#45;"

    def card(length: int) -> RequestCard:
        args = base.args.model_copy(update={"markdown": body, "question": "q" * length})
        return RequestCard(ref="r_1", args=args, agent_name="a")

    over = feishu.card_size(feishu._card(card(200), step)) - feishu.MAX_BYTES
    seen = set()
    for length in range(200 - over - 60, 200 - over + 20):  # one byte more each
        _, fits = _reference(card(length), step)
        seen.add(fits)
        assert (feishu._fitted(card(length), step, last=False) is not None) == fits, length
    assert seen == {True, False}
