"""Golden files: 3 requests x 5 states x 3 platforms. ``UPDATE_GOLDEN=1`` regenerates."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from renderers import feishu, slack, text
from renderers.card import RequestCard
from tests.renderers.cases import REQUESTS, STATES, make_card
from tests.renderers.helpers import assert_valid_feishu, assert_valid_slack

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


FEISHU_DECIDER = "ou_5d2c8e1f0a9b4c7d6e3f2a1b0c9d8e7f"


def _render(name: str, state: str, platform: str) -> str:
    return _render_card(make_card(name, state), platform)


def _render_card(card: RequestCard, platform: str) -> str:
    if platform == "text":
        return text.render_text(card)
    if platform == "slack":
        payload = slack.render_request(card)
        assert_valid_slack(payload, allowed=("<@U024BE7LH>",))
    else:
        payload = feishu.render_card(card)
        assert_valid_feishu(payload, allowed=(f"<at id={FEISHU_DECIDER}></at>",))
    return json.dumps(payload, indent=2, ensure_ascii=False, sort_keys=True) + "\n"


@pytest.mark.parametrize("platform", ["slack", "feishu", "text"])
@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_golden(name: str, state: str, platform: str) -> None:
    _check(f"{name}.{state}", platform, _render(name, state, platform))


@pytest.mark.parametrize("platform", ["slack", "feishu", "text"])
def test_golden_decided_on_feishu(platform: str) -> None:
    """A Feishu decider has an open_id and no display name: Feishu mentions that one
    person, the other renderers say where they decided (never the raw id)."""
    card = dataclasses.replace(make_card("deploy", "submitted"), decided_by_id=FEISHU_DECIDER,
                               decided_by_name=None, decided_by_platform="feishu")
    _check("deploy.submitted-on-feishu", platform, _render_card(card, platform))


def _check(stem: str, platform: str, rendered: str) -> None:
    suffix = "txt" if platform == "text" else f"{platform}.json"
    path = GOLDEN / f"{stem}.{suffix}"
    if UPDATE or not path.exists():
        path.write_text(rendered, encoding="utf-8")
        if not UPDATE:
            pytest.fail(f"golden {path.name} was missing and has been written; re-run")
    assert rendered == path.read_text(encoding="utf-8")
