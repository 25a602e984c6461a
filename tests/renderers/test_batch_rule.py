"""Which requests a pending list may decide together (``renderers.batch``, documented
in docs/batch.md), and the answer a batch gets, in both languages."""

from __future__ import annotations

from typing import Any

from bot.askhuman.schema import AskHumanToolArgs
from bot.engine.batch import BatchItem, BatchResult
from bot.engine.batch_reader import read_batch_click
from bot.engine.clicks import DEFERRED
from bot.engine.results import RespondResult
from bot.engine.values import InvalidValues
from renderers.batch import APPROVE_TOKEN, REJECT_TOKEN, batch_choice, batchable, split
from renderers.card import RequestCard
from renderers.tool_card import tool_approval_card, tool_approval_view
from renderers.words import said


def ask(actions: list[dict[str, Any]], fields: list[dict[str, Any]] | None = None
        ) -> RequestCard:
    args = AskHumanToolArgs.model_validate({"question": "Q?", "actions": actions,
                                            "fields": fields or []})
    return RequestCard(ref="r1", args=args, agent_name="a")


GO = {"id": "go", "label": "Go", "style": "primary"}
STOP = {"id": "stop", "label": "Stop", "style": "destructive"}
LATER = {"id": "later", "label": "Later"}


def test_tool_approvals_and_one_primary_one_destructive_asks_may_be_batched() -> None:
    tool = tool_approval_card("r2", tool_approval_view("t", "", {"n": 1}, {}, "b" * 64), "a")
    assert batchable(tool) and batch_choice(tool, APPROVE_TOKEN, None)[0].id == "approve"
    assert batchable(ask([GO, STOP])) and batchable(ask([GO, LATER, STOP]))
    reason = {"type": "paragraph", "name": "reason", "label": "Why", "required": True}
    assert batchable(ask([GO, STOP], [reason]))
    optional = {"type": "select", "name": "env", "label": "Env",
                "options": [{"value": "p", "label": "p"}]}
    assert batchable(ask([GO, STOP], [optional]))


def test_anything_needing_its_form_or_an_unclear_choice_is_not() -> None:
    assert not batchable(ask([GO]))  # no reject-like action
    assert not batchable(ask([GO, {**STOP, "style": "primary"}]))  # two primaries
    assert not batchable(ask([{**GO, "style": "default"}, STOP]))
    required = {"type": "select", "name": "env", "label": "Env", "required": True,
                "options": [{"value": "p", "label": "p"}]}
    assert not batchable(ask([GO, STOP], [required]))
    required_text = {"type": "paragraph", "name": "why", "label": "Why", "required": True}
    assert not batchable(ask([GO, STOP], [required_text]))  # not a reason field


def test_the_token_maps_to_the_cards_action_with_the_reason_in_its_field() -> None:
    card = ask([GO, STOP], [{"type": "paragraph", "name": "askhuman_reason", "label": "R"}])
    assert read_batch_click(card, REJECT_TOKEN, {"reason": " freeze "}) == (
        "stop", {"askhuman_reason": "freeze"})
    assert read_batch_click(card, APPROVE_TOKEN, {}) == ("go", {})
    assert read_batch_click(ask([GO, STOP]), APPROVE_TOKEN, {"reason": "x"}) == ("go", {})
    try:
        read_batch_click(ask([GO]), APPROVE_TOKEN, {})
    except InvalidValues as exc:
        assert exc.words == said("batch.needs_card")
    else:
        raise AssertionError("a card that needs its form is refused")


def test_checkbox_groups_hold_at_most_ten() -> None:
    cards = [ask([GO, STOP])] * 23
    assert [len(group) for group in split(cards)] == [10, 10, 3]


def test_the_answer_names_what_happened_in_both_languages() -> None:
    def item(title: str, outcome: str, words: Any) -> BatchItem:
        return BatchItem(title.lower(), title, RespondResult(outcome, words))  # type: ignore[arg-type]

    result = BatchResult("approve", (
        item("A", "accepted", said("answer.recorded", label="Approve")),
        item("B", "accepted", said("answer.recorded", label="Approve")),
        item("C", "rejected", said("refused.reason_needed", label="x", field="y", again="z")),
        item("D", "already_decided", said("decided.by", by="Bob")),
        item("E", "recorded", said("vote.progress", votes=1, needed=2, who="Ann (Approve)")),
        item("F", "recorded", DEFERRED),
    ), dropped=2)
    english = result.words.text("en")
    assert english.startswith("Approved 2. Your vote was counted on 1, still waiting for "
                              "other approvers: \u201cE\u201d. 1 received and still being "
                              "processed (you will be told the outcome): \u201cF\u201d. "
                              "Not recorded: \u201cC\u201d (needs a reason), \u201cD\u201d (")
    assert english.endswith("2 more were not processed (at most 20 at a time).")
    chinese = result.words.text("zh-CN")
    assert chinese.startswith("已批准 2 个。") and "（需要填写理由）" in chinese


def test_model_written_titles_are_escaped_in_both_lists() -> None:
    import json

    from renderers.feishu_batch import batch_card
    from renderers.slack.batch_list import batch_blocks

    hostile = "<!channel> <@U1> *boom* <at id=all></at>"
    needs_form = RequestCard(ref="r9", agent_name="a", args=AskHumanToolArgs.model_validate(
        {"title": hostile, "question": "Q?", "actions": [GO]}))
    box = RequestCard(ref="r8", agent_name="a", args=AskHumanToolArgs.model_validate(
        {"title": hostile, "question": "Q?", "actions": [GO, STOP]}))
    routes = {"r9": "ops", "r8": "ops"}
    slack = batch_blocks([box, needs_form], routes)
    mrkdwn = [e["text"] for b in slack if b["type"] == "context" for e in b["elements"]]
    assert mrkdwn and all("<!channel>" not in t and "<@U1>" not in t and "&lt;" in t
                          for t in mrkdwn)
    [checkboxes] = [b for b in slack if b.get("block_id", "").startswith("ahb_sel:")]
    assert checkboxes["element"]["options"][0]["text"]["type"] == "plain_text"
    feishu = batch_card([box, needs_form], routes, 2)
    texts = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "content" in node:
                assert node.get("tag") == "plain_text", node  # never parsed by Feishu
                texts.append(node["content"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(feishu["body"])
    assert any("boom" in t for t in texts) and json.dumps(feishu)
