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


def _tool_card(locale: str) -> RequestCard:
    """A tool-approval card as the engine shows it on a route in ``locale``."""
    from bot.engine.cards import localized
    from renderers.tool_card import tool_approval_card, tool_approval_view

    view = tool_approval_view("delete_branch", "Deletes a git branch.",
                              {"branch": "feature/<!channel>", "force": True},
                              {"repo": "acme/api"}, "ab" * 32)
    card = tool_approval_card("req_tool_7f3a", view, "ops-agent",
                              make_card("deploy").deadline)
    return localized(card, type("Route", (), CHINA if locale == "zh-CN" else {})())


@pytest.mark.parametrize("platform", ["slack", "feishu", "text"])
@pytest.mark.parametrize("locale", ["en", "zh-CN"])
def test_golden_tool_card(locale: str, platform: str) -> None:
    """Tool-approval chrome (title, question, reason, buttons, "wants to run", the admin
    marker) follows the route's locale; tool names and argument values never do."""
    rendered = _render_card(_tool_card(locale), platform)
    _check(f"{locale}.tool.pending", platform, rendered)
    assert "delete_branch" in rendered and "feature/" in rendered and "acme/api" in rendered
    chinese = ("审批工具调用", "想运行", "管理员固定", "批准", "拒绝")
    if locale == "zh-CN":
        assert all(word in rendered for word in chinese), rendered[:400]
        assert "Approve" not in rendered and "wants to run" not in rendered
    else:
        assert not any(word in rendered for word in chinese)
        assert "wants to run" in rendered and "(fixed by admin)" in rendered


def test_zh_cn_tool_card_answers_map_to_the_same_ids() -> None:
    card = _tool_card("zh-CN")
    assert [a.id for a in card.args.actions] == ["approve", "reject"]
    assert [f.name for f in card.args.fields] == ["reason"]
    decided = dataclasses.replace(_tool_card("en"), status="submitted", action_id="reject",
                                  action_label="Reject")
    from bot.engine.cards import localized

    shown = localized(decided, type("Route", (), CHINA)())
    assert shown.action_label == "拒绝" and "已回复: 拒绝" in text.render_text(shown)


def test_every_sentence_people_are_told_has_a_chinese_template() -> None:
    """What the engine and listeners tell people is words by key: their English is the
    sentence as always written, and their Chinese has no English left but the names."""
    from bot.engine import authz
    from bot.engine.access import NOT_FOUND
    from bot.engine.clicks import DEFERRED, GAVE_UP, NOT_RECORDED
    from bot.engine.health import DATABASE_DOWN
    from bot.engine.values import quoted
    from bot.engine.withdraw import NOT_ALLOWED as WITHDRAW_REFUSED
    from bot.platforms.feishu.handlers import WORKING
    from bot.platforms.slack.listeners.actions import UNKNOWN_BUTTON
    from bot.platforms.slack.listeners.commands import PENDING_FAILED
    from renderers.words import platform_name, said, verbatim

    received = said("click.received")
    assert str(received) == WORKING
    written = [
        (said("value.required", label=quoted("Environment")),
         f"{quoted('Environment')} is required"),
        (said("decided.by_choice_at", by="Alice", choice="Approve", when="2025-01-31 12:00 UTC"),
         "Already decided by Alice (Approve) at 2025-01-31 12:00 UTC."),
        (said("closed.timed_out_at", when="2025-01-31 12:00 UTC"),
         "This request timed out at 2025-01-31 12:00 UTC."),
        (said("answer.recorded", label="Approve"), "Thanks, your answer (Approve) was recorded."),
        (said("vote.duplicate_elsewhere", action="approve", platform=platform_name("slack")),
         "You already answered (approve) on Slack; waiting for the other approvers."),
        (said("vote.progress", votes=1, needed=2, who="Alice (Approve)"),
         "Recorded, 1 of 2 approvals: Alice (Approve)."),
        (said("refused.own_run"),
         "You started this run, so you cannot answer it for someone else."),
    ]
    for words, english in written:
        assert str(words) == english
    told = [authz.NOT_ALLOWED, authz.SELF_APPROVAL, authz.UNVERIFIED, NOT_FOUND, DEFERRED,
            GAVE_UP, NOT_RECORDED, DATABASE_DOWN, WITHDRAW_REFUSED, received, UNKNOWN_BUTTON,
            PENDING_FAILED, *(words for words, _ in written)]
    for words in told:
        sentence = str(words)
        chinese = words.text("zh-CN")
        assert chinese != sentence and not any(c.isascii() and c.isalpha() for c in
                                               chinese.replace("Environment", "")
                                               .replace("Alice", "").replace("Approve", "")
                                               .replace("UTC", "").replace("askhuman", "")
                                               .replace("approve", "").replace("Slack", "")), \
            (sentence, chinese)
        assert words.text("en") == sentence
    assert verbatim("Something the catalog has never seen.").text("zh-CN") == (
        "Something the catalog has never seen.")
