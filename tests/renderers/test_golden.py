"""Golden files: 3 requests x 5 states x 3 platforms. ``UPDATE_GOLDEN=1`` regenerates."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from renderers import feishu, slack, text
from tests.renderers.cases import REQUESTS, STATES, make_card
from tests.renderers.helpers import assert_valid_feishu, assert_valid_slack

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def _render(name: str, state: str, platform: str) -> str:
    card = make_card(name, state)
    if platform == "text":
        return text.render_text(card)
    if platform == "slack":
        payload = slack.render_request(card)
        assert_valid_slack(payload, allowed=("<@U024BE7LH>",))
    else:
        payload = feishu.render_card(card)
        assert_valid_feishu(payload)
    return json.dumps(payload, indent=2, ensure_ascii=False, sort_keys=True) + "\n"


@pytest.mark.parametrize("platform", ["slack", "feishu", "text"])
@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_golden(name: str, state: str, platform: str) -> None:
    suffix = "txt" if platform == "text" else f"{platform}.json"
    path = GOLDEN / f"{name}.{state}.{suffix}"
    rendered = _render(name, state, platform)
    if UPDATE or not path.exists():
        path.write_text(rendered, encoding="utf-8")
        if not UPDATE:
            pytest.fail(f"golden {path.name} was missing and has been written; re-run")
    assert rendered == path.read_text(encoding="utf-8")
