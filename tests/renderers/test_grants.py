"""Standing grants in chat: the Slack list and Home section, the Feishu card. Valid for
each platform, every part shown (what it allows, who granted it, uses left, expiry in
the route's time zone), model-written text inert, chrome in both languages, and the
Revoke ids read back only when they are ours."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

from renderers import home
from renderers.feishu_grants import grant_value, grants_card, parse_grant_value
from renderers.grants import GrantLine, args_summary
from renderers.slack.grants import (
    MAX_SHOWN,
    grants_message,
    parse_revoke_action_id,
    revoke_action_id,
)
from tests.fakes.slack_api import validate_blocks
from tests.renderers.cases import make_card
from tests.renderers.helpers import (
    assert_feishu_no_pings,
    assert_valid_feishu,
    assert_valid_slack,
    assert_valid_view,
    feishu_texts,
    slack_texts,
    walk,
)
from tests.renderers.test_injection import CORPUS

EXPIRES = dt.datetime(2026, 12, 2, 9, 0, tzinfo=dt.UTC)


def grant(**changes: Any) -> GrantLine:
    base = GrantLine(id=7, label="G-7", route="ops", agent="ops", tool="restart_service",
                     scope=None, args={"service": "web", "replicas": 3}, granted_by="Alice",
                     expires_at=EXPIRES, max_uses=10, uses=7, timezone=None)
    return dataclasses.replace(base, **changes)


HOSTILE = grant(agent="<!channel> @here-bot", tool="<at id=all></at>",
                args={"note": " ".join(CORPUS), "url": "<javascript:alert(1)|click me>",
                      "md": "[x](javascript:alert(1))"},
                scope="args.x == '<!here>'", granted_by="<@U123> <at id=all></at>")


def _visible(texts: list[str]) -> str:
    return "\n".join(texts).replace("\u2060", "")


def test_slack_list_shows_what_each_grant_allows() -> None:
    message = grants_message([grant(), grant(id=8, label="G-8", scope="args.service == "
                                             "call.service")], "en")
    assert_valid_slack(message)
    assert validate_blocks(message["blocks"]) is None
    text = _visible(slack_texts(message))
    assert "Standing grants you may revoke (2):" in text
    assert "*G-7*: `ops` may run `restart_service` with the exact same arguments" in text
    assert "arguments matching args.service == call.service" in text
    assert "Granted for: `service=web, replicas=3`" in text
    assert "granted by Alice · 3 of 10 uses left · until 2026-12-02 09:00 UTC" in text
    buttons = [d for d in walk(message) if d.get("type") == "button"]
    assert [b["action_id"] for b in buttons] == ["ahg:7", "ahg:8"]
    assert all(b["style"] == "danger" and b["confirm"]["title"]["text"].startswith("Revoke G-")
               for b in buttons)


def test_slack_list_keeps_model_text_inert() -> None:
    message = grants_message([HOSTILE], "en", notice="&lt;!channel&gt; told")
    assert_valid_slack(message)  # no pings, no link but http(s)/mailto
    raw = json.dumps(message)
    assert "<!channel>" not in raw and "<javascript:" not in raw and "<@U123>" not in raw
    text = _visible(slack_texts(message))
    assert "&lt;!channel&gt; @here-bot" in text and "&lt;javascript:alert(1)|click me&gt;" in text
    sections = [d for d in walk(message) if d.get("type") == "mrkdwn"]
    assert all(d["verbatim"] is True for d in sections)  # Slack auto-links nothing


def test_slack_list_is_bounded_and_says_how_many_more() -> None:
    many = [grant(id=i, label=f"G-{i}") for i in range(1, 31)]
    message = grants_message(many, "en")
    assert_valid_slack(message)
    assert len([d for d in walk(message) if d.get("type") == "button"]) == MAX_SHOWN
    assert "10 more not shown." in json.dumps(message)
    empty = grants_message([], "en")
    assert empty["text"] == "No active standing grants on the routes you may answer."
    assert [d for d in walk(empty) if d.get("type") == "button"] == []


def test_expiry_is_in_the_route_time_zone_and_zh_cn_chrome() -> None:
    message = grants_message([grant(timezone="Asia/Shanghai")], "zh-CN")
    text = "\n".join(slack_texts(message))
    assert "你可以撤销的长期授权（1 个）" in text and "参数须完全相同" in text
    assert "剩余 3/10 次" in text and "有效期至 2026-12-02 17:00 UTC+8" in text
    assert "授权人 Alice" in text and "Revoke" not in text
    assert any(b["text"]["text"] == "撤销" for b in walk(message) if b.get("type") == "button")


def test_revoke_action_ids_read_back_only_when_ours() -> None:
    assert parse_revoke_action_id(revoke_action_id(42)) == 42
    for forged in ("ahg:", "ahg:x", "ahg:-1", "ahg:" + "9" * 30, "ah:ref:approve", None, 7):
        assert parse_revoke_action_id(forged) is None


def test_feishu_card_lists_grants_with_revoke_buttons() -> None:
    card = grants_card([grant(), grant(id=9, label="G-9", timezone="Asia/Shanghai")], "en",
                       notice="Revoked standing grant G-8.")
    assert_valid_feishu(card)
    text = "\n".join(feishu_texts(card))
    assert "Revoked standing grant G-8." in text
    assert "G-7: ops may run restart_service with the exact same arguments" in text
    assert "until 2026-12-02 09:00 UTC" in text and "until 2026-12-02 17:00 UTC+8" in text
    buttons = [d for d in walk(card) if d.get("tag") == "button"]
    assert [b["behaviors"][0]["value"] for b in buttons] == [{"g": 7, "l": "en"},
                                                             {"g": 9, "l": "en"}]
    zh = grants_card([grant()], "zh-CN")
    zh_text = "\n".join(feishu_texts(zh))
    assert "你可以撤销的长期授权（1 个）" in zh_text and "授权人 Alice" in zh_text
    assert [b["behaviors"][0]["value"] for b in walk(zh) if b.get("tag") == "button"] == [
        {"g": 7, "l": "zh-CN"}]
    none = grants_card([], "zh-CN")
    assert "你可以处理的路由上没有生效中的长期授权。" in feishu_texts(none)


def test_feishu_card_keeps_model_text_inert() -> None:
    card = grants_card([HOSTILE], "en")
    assert_valid_feishu(card)
    assert_feishu_no_pings(card)
    assert not [d for d in walk(card) if d.get("tag") in ("markdown", "lark_md")]
    assert "<at id=all>" not in json.dumps(card, ensure_ascii=False)


def test_feishu_grant_values_read_back_only_when_ours() -> None:
    assert parse_grant_value(grant_value(7, "zh_CN")) == (7, "zh-CN")
    assert parse_grant_value(json.dumps({"g": 7})) == (7, "en")
    for forged in ({"g": True}, {"g": "7"}, {"g": 0}, {"g": 10**19}, {"r": "ref", "g": 7},
                   {"r": "ref", "a": "approve"}, "not json", None, [7]):
        assert parse_grant_value(forged) is None


def test_args_are_shortened() -> None:
    long = args_summary({"body": "x" * 500, "nested": {"a": [1, 2]}, "lines": "a\nb"})
    assert len(long) <= 300 and "x" * 59 + "…" in long
    assert args_summary({"nested": {"a": [1, 2]}, "lines": "a\n b"}) == (
        'nested={"a":[1,2]}, lines=a b')


def test_home_shows_grants_between_requests_and_runs() -> None:
    cards = [dataclasses.replace(make_card("deploy"), ref=f"ref{i:02d}") for i in range(20)]
    grants = [grant(id=i, label=f"G-{i}") for i in range(1, 16)]
    view = home.home_view(cards, 20, [], grants=grants, notice="Revoked.", notice_ok=True)
    assert_valid_view(view)
    assert len(view["blocks"]) <= home.MAX_BLOCKS
    ids = [b["block_id"] for b in view["blocks"] if "block_id" in b]
    assert len(ids) == len(set(ids))
    revokes = [d["action_id"] for d in walk(view) if str(d.get("action_id", "")).startswith(
        "ahg:")]
    assert len(revokes) == home.HOME_GRANTS
    text = json.dumps(view)
    assert ":white_check_mark: Revoked." in text and "5 more not shown." in text
    assert text.index("Standing grants you may revoke") < text.index("Runs you started")
    hostile = home.home_view([], 0, [], grants=[HOSTILE])
    assert_valid_view(hostile)
    assert "<!channel>" not in json.dumps(hostile)
    assert "Standing grants" not in json.dumps(home.home_view([], 0, []))
