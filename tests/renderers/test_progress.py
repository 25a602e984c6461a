"""Quorum progress and sign-offs on every copy: "1 of 2 approvals: Alice (Approve)",
in the route's locale, with responder names escaped like any other text."""

from __future__ import annotations

import dataclasses
import json

import pytest

from renderers import feishu, slack, text
from renderers.card import RequestCard
from tests.renderers.cases import make_card
from tests.renderers.helpers import (
    assert_feishu_no_pings,
    assert_slack_no_pings,
    assert_valid_feishu,
    assert_valid_slack,
)


def progress(locale: str = "en", name: str = "Alice") -> RequestCard:
    return dataclasses.replace(
        make_card("deploy", "pending"), locale=locale, quorum=2, votes=1,
        responses=((name, "Approve"),), signoffs=(("Security", True), ("Ops", False)))


def rendered(card: RequestCard) -> dict[str, str]:
    return {"slack": json.dumps(slack.render_request(card), ensure_ascii=False),
            "feishu": json.dumps(feishu.render_card(card), ensure_ascii=False),
            "text": text.render_text(card)}


@pytest.mark.parametrize(("locale", "words"), [
    ("en", ["1 of 2 approvals: Alice (Approve)", "Sign-off: Security \u2713, Ops (waiting)"]),
    ("zh-CN", ["已批准 1/2：Alice（Approve）", "会签：Security \u2713, Ops（待签）"]),
])
def test_every_copy_shows_progress_and_sign_offs(locale: str, words: list[str]) -> None:
    for platform, body in rendered(progress(locale)).items():
        for word in words:
            assert word in body, (platform, word)
        assert "Votes 1/2" not in body and "票数" not in body


def test_a_decided_card_drops_the_progress_line() -> None:
    card = dataclasses.replace(progress(), status="submitted", action_label="Approve")
    for body in rendered(card).values():
        assert "approvals:" not in body and "Sign-off" not in body


def test_responder_names_cannot_ping_or_format() -> None:
    card = progress(name="<!channel> <at id=all></at> [x](javascript:alert(1))")
    payload = slack.render_request(card)
    assert_valid_slack(payload)
    assert_slack_no_pings(payload)
    assert "&lt;!channel&gt;" in json.dumps(payload)
    card_json = feishu.render_card(card)
    assert_valid_feishu(card_json)
    assert_feishu_no_pings(card_json)
