"""Cards of a ``locale: zh-CN`` route (Asia/Shanghai): Chinese chrome, the model's
text untouched, dates in the route's time zone. Golden files for Slack, Feishu, text;
``UPDATE_GOLDEN=1`` regenerates them."""

from __future__ import annotations

import dataclasses
import json

import pytest

from renderers import feishu, i18n, slack, text
from renderers.card import RequestCard
from tests.renderers.cases import make_card
from tests.renderers.test_golden import _check, _render_card

CHINA = {"locale": "zh-CN", "timezone": "Asia/Shanghai"}


def zh(name: str, state: str) -> RequestCard:
    return dataclasses.replace(make_card(name, state), **CHINA)


@pytest.mark.parametrize("platform", ["slack", "feishu", "text"])
@pytest.mark.parametrize("state", ["pending", "submitted", "timeout", "cancelled"])
def test_golden_zh_cn(state: str, platform: str) -> None:
    _check(f"zh-CN.deploy.{state}", platform, _render_card(zh("deploy", state), platform))


def test_zh_cn_chrome_is_chinese_and_model_text_is_not_translated() -> None:
    card = zh("deploy", "pending")
    english = make_card("deploy", "pending")
    for rendered in (json.dumps(slack.render_request(card), ensure_ascii=False),
                     json.dumps(feishu.render_card(card), ensure_ascii=False)):
        assert "截止" in rendered and "来自" in rendered
        assert "Due " not in rendered and "From " not in rendered
        assert card.args.question[:40] in rendered  # the model's words, as written
        assert "UTC+8" in rendered
    assert english.deadline is not None
    local = english.deadline.astimezone(__import__("zoneinfo").ZoneInfo("Asia/Shanghai"))
    assert local.strftime("%Y-%m-%d %H:%M") in text.render_text(card)
    decided = text.render_text(zh("deploy", "submitted"))
    assert "已回复" in decided and "Answered" not in decided
    assert "Answered" in text.render_text(make_card("deploy", "submitted"))


def test_unknown_locale_falls_back_to_english() -> None:
    assert i18n.normalize("fr-FR") == "en" and i18n.normalize("zh_cn") == "zh-CN"
    card = dataclasses.replace(make_card("deploy", "timeout"), locale="fr-FR")
    assert "Timed out" in text.render_text(card)
    assert set(i18n.CATALOG["zh-CN"]) == set(i18n.CATALOG["en"])
