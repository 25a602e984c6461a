"""The injection corpus: everything stays visible as text and nothing pings or links."""

from __future__ import annotations

import json

import pytest

from bot.askhuman.schema import AskHumanToolArgs
from renderers import feishu, slack, text
from renderers.card import RequestCard
from renderers.markdown import (
    FEISHU,
    SLACK,
    UnsafeOutputError,
    check_feishu,
    check_slack,
    markdown_units,
)
from tests.renderers.helpers import (
    assert_valid_feishu,
    assert_valid_slack,
    feishu_texts,
    slack_texts,
    walk,
)

CORPUS = [
    "<!channel>", "<!here|here>", "<@U123>", "<!subteam^S1>", "@everyone",
    "<at id=all></at>", '<at user_id="all"></at>', "[x](javascript:alert(1))", "<script>",
]
BODY = "\n\n".join(CORPUS) + "\n\n" + ("lorem ipsum dolor sit amet " * 800)[:20000]


def _card() -> RequestCard:
    args = AskHumanToolArgs.model_validate({
        "title": " ".join(CORPUS)[:300],
        "question": " ".join(CORPUS),
        "markdown": BODY[:20000],
        "fields": [
            {"name": "why", "label": "<!channel> why?", "type": "paragraph",
             "placeholder": "@everyone <at id=all></at>"},
            {"name": "pick", "label": "<@U123>", "type": "select",
             "options": [{"value": "<!here>", "label": "<!subteam^S1> @everyone"}]},
        ],
        "actions": [{"id": "go", "label": "<!channel> go", "style": "destructive"}],
    })
    return RequestCard(ref="r1", args=args, agent_name="@here-bot")


def _visible(texts: list[str]) -> str:
    return "\n".join(texts).replace("\u2060", "")


def test_slack_keeps_corpus_visible_and_inert() -> None:
    payload = slack.render_request(_card())
    assert_valid_slack(payload)
    seen = _visible(slack_texts(payload))
    for word in ("channel", "everyone", "javascript", "subteam", "script", "here"):
        assert word in seen
    assert "<https://" not in seen and "<javascript" not in seen


def test_feishu_keeps_corpus_visible_and_inert() -> None:
    card = feishu.render_card(_card())
    assert_valid_feishu(card)
    seen = _visible(feishu_texts(card))
    for word in ("channel", "everyone", "javascript", "at id=all", "script"):
        assert word in seen
    markdown = [d["content"] for d in walk(card) if d.get("tag") == "markdown"]
    assert markdown and not any("](javascript" in m for m in markdown)


def test_text_keeps_corpus_visible() -> None:
    out = text.render_text(_card()).replace("\u2060", "")
    for fragment in CORPUS:
        assert fragment in out


@pytest.mark.parametrize("fragment", CORPUS)
def test_each_fragment_alone_in_markdown(fragment: str) -> None:
    for unit in markdown_units(fragment, SLACK):
        check_slack({"type": "mrkdwn", "text": unit})
        assert "<" not in unit
    for unit in markdown_units(fragment, FEISHU):
        check_feishu({"tag": "markdown", "content": unit})
        assert "<" not in unit


def test_long_body_splits_within_section_limit() -> None:
    payload = slack.render_request(_card())
    sections = [b for b in payload["blocks"] if b["type"] == "section"]
    assert len(sections) >= 3
    assert all(len(b["text"]["text"]) <= 3000 for b in sections)
    assert any(b["text"]["text"].endswith("…") for b in sections)


@pytest.mark.parametrize(
    "bad",
    [{"type": "mrkdwn", "text": "<!here>"}, {"type": "plain_text", "text": "hi @channel"},
     {"type": "mrkdwn", "text": "<@U999>"}],
)
def test_slack_post_check_raises(bad: dict[str, str]) -> None:
    with pytest.raises(UnsafeOutputError):
        check_slack({"blocks": [{"type": "section", "text": bad}]})


def test_slack_post_check_allows_only_the_trusted_mention() -> None:
    check_slack({"text": "by <@U024BE7LH>"}, allowed_mentions=["<@U024BE7LH>"])
    with pytest.raises(UnsafeOutputError):
        check_slack({"text": "by <@U024BE7LH> <@U1>"}, allowed_mentions=["<@U024BE7LH>"])


@pytest.mark.parametrize(
    "bad",
    [{"tag": "markdown", "content": "<at id=all></at>"},
     {"tag": "plain_text", "content": "<AT ids=a,b>"},
     {"tag": "markdown", "content": "[x](javascript:alert(1))"},
     {"tag": "markdown", "content": "< font color=red>"}],
)
def test_feishu_post_check_raises(bad: dict[str, str]) -> None:
    with pytest.raises(UnsafeOutputError):
        check_feishu({"body": {"elements": [bad]}})


def test_untrusted_decider_id_is_not_a_mention() -> None:
    card = _card()
    import dataclasses

    decided = dataclasses.replace(card, status="submitted", decided_by_id="<!channel>",
                                  decided_by_name="<!here>", action_label="go")
    payload = slack.render_request(decided)
    assert_valid_slack(payload)
    assert "<@" not in json.dumps(payload)
