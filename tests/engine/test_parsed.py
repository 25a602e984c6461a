"""``ParsedMemo`` reuses a parse only for an equal raw value, and what it shares (a
request's args, its frozen policy) is never changed by the code that reads it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bot.askhuman.schema import AskHumanToolArgs
from bot.engine.parsed import ParsedMemo
from bot.engine.values import check_answer
from renderers.feishu import render_card
from renderers.slack import render_request
from tests.renderers.cases import ANSWERS, REQUESTS, STATES, make_card, max_card


def _counting() -> tuple[ParsedMemo[AskHumanToolArgs], list[object]]:
    parsed: list[object] = []

    def parse(raw: Any) -> AskHumanToolArgs:
        parsed.append(raw)
        return AskHumanToolArgs.model_validate(raw)

    return ParsedMemo(parse, size=2), parsed


def test_an_equal_raw_value_reuses_the_parse() -> None:
    memo, parsed = _counting()
    first = memo.get("req_a", copy.deepcopy(REQUESTS["deploy"]))
    again = memo.get("req_a", copy.deepcopy(REQUESTS["deploy"]))  # a fresh, equal read
    assert again is first and len(parsed) == 1


def test_a_different_raw_value_under_the_same_key_is_parsed_again() -> None:
    memo, parsed = _counting()
    memo.get("req_a", REQUESTS["deploy"])
    changed = copy.deepcopy(REQUESTS["deploy"])
    changed["question"] = "Deploy v2.15.0 instead?"
    assert memo.get("req_a", changed).question == "Deploy v2.15.0 instead?"
    assert memo.get("req_a", REQUESTS["deploy"]).question == REQUESTS["deploy"]["question"]
    assert len(parsed) == 3


def test_a_failed_parse_is_raised_every_time_and_never_kept() -> None:
    memo, parsed = _counting()
    with pytest.raises(ValueError):
        memo.get("req_bad", {"question": 3})
    with pytest.raises(ValueError):
        memo.get("req_bad", {"question": 3})
    assert len(parsed) == 2


def test_the_oldest_key_is_dropped_past_the_size() -> None:
    memo, parsed = _counting()
    for key in ("req_a", "req_b", "req_c"):
        memo.get(key, REQUESTS["deploy"])
    memo.get("req_c", REQUESTS["deploy"])  # kept
    memo.get("req_a", REQUESTS["deploy"])  # dropped: parsed again
    assert len(parsed) == 4


def _cards() -> list[Any]:
    return [make_card(name, state) for name in REQUESTS for state in STATES] + [max_card()]


@pytest.mark.parametrize("card", _cards(), ids=lambda c: f"{c.ref}-{c.status}")
def test_reading_a_card_never_changes_its_shared_args(card: Any) -> None:
    """Every card of a request shares one ``AskHumanToolArgs`` now: rendering it on
    either platform and checking an answer against it must leave it as it was."""
    before = card.args.model_dump()
    render_request(card)
    render_card(card)
    name = card.ref.split("_")[1]
    if name in ANSWERS:
        action_id, _label, values = ANSWERS[name]
        check_answer(card.args, action_id, values)
    assert card.args.model_dump() == before
