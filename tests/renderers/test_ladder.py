"""The budget ladder skips steps that cannot fit, without changing what is rendered."""

from __future__ import annotations

from typing import Any

import pytest

from bot.askhuman.schema import AskHumanToolArgs
from renderers import budget, feishu
from renderers.card import RequestCard
from renderers.slack import message as slack
from tests.renderers.cases import max_card


def _naive_ladder(steps: Any, args: Any, limit: int, per_option: int = 0) -> Any:
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


@pytest.mark.parametrize("card", CARDS)
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
