"""The App Home view: valid Block Kit within Slack's limits, unique block ids, model
text inert, chrome in the person's locale, block ids mapped back to the card's."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

from renderers import home, slack
from renderers.card import RunLine
from tests.renderers.cases import make_card
from tests.renderers.helpers import assert_slack_no_pings, assert_valid_view
from tests.renderers.test_injection import CORPUS, _card


def test_many_requests_fit_the_view_and_the_rest_are_counted() -> None:
    cards = [dataclasses.replace(make_card("deploy"), ref=f"ref{i:02d}") for i in range(20)]
    view = home.home_view(cards, 25, [])
    assert_valid_view(view)
    assert len(view["blocks"]) <= home.MAX_BLOCKS
    ids = [b["block_id"] for b in view["blocks"] if "block_id" in b]
    assert len(ids) == len(set(ids))
    shown = {b["block_id"].split("|")[0] for b in view["blocks"] if "block_id" in b}
    assert 1 <= len(shown) < 20
    assert f"{25 - len(shown)} more not shown" in json.dumps(view)


def test_model_text_and_prompts_stay_inert() -> None:
    run = RunLine("r1", "deploy", "waiting", " ".join(CORPUS), dt.datetime(2026, 1, 1),
                  waiting_on=" ".join(CORPUS))
    view = home.home_view([_card()], 1, [run], notice="&lt;!channel&gt; refused")
    assert_valid_view(view)
    assert_slack_no_pings(view)
    assert "<!channel>" not in json.dumps(view)


def test_state_values_map_back_to_the_card() -> None:
    card = make_card("deploy")
    view = home.home_view([card], 1, [])
    inputs = [b["block_id"] for b in view["blocks"] if b["type"] == "input"]
    assert inputs and all(bid.startswith(card.ref + "|") for bid in inputs)
    state = {bid: {"in": {"type": "plain_text_input", "value": "x"}} for bid in inputs}
    state["other|v1:x"] = {"in": {"type": "plain_text_input", "value": "y"}}
    mapped = home.card_state(state, card.ref)
    own = [b["block_id"] for b in slack.render_request(card)["blocks"] if b["type"] == "input"]
    assert sorted(mapped) == sorted(own)


def test_zh_cn_home_chrome() -> None:
    run = RunLine("r1", "deploy", "succeeded", "ship it", dt.datetime(2026, 1, 1))
    view = json.dumps(home.home_view([make_card("deploy")], 1, [run], locale="zh-CN",
                                     timezone="Asia/Shanghai"), ensure_ascii=False)
    assert "等待你处理" in view and "你发起的运行" in view and "已完成" in view
    assert "UTC+8" in view and "Waiting for you" not in view
    empty = json.dumps(home.home_view([], 0, [], locale="zh-CN"), ensure_ascii=False)
    assert "没有等待你处理的请求" in empty and "你还没有发起过运行" in empty
