"""The approval card (Slack, Feishu, text) and the answer → ToolApproved/ToolDenied map."""

from __future__ import annotations

import json

import pytest
from pydantic_ai import ToolApproved, ToolDenied

from bot.askhuman.schema import (
    AskHumanSelectedAction,
    AskHumanToolResult,
    cancelled_result,
    timeout_result,
    unavailable_result,
)
from bot.engine.values import check_answer
from bot.tools import approval
from renderers import tool_card
from renderers.card import RequestCard
from renderers.feishu import render_card
from renderers.feishu_values import read_values as feishu_values
from renderers.markdown import check_feishu, check_plain, check_slack
from renderers.slack import read_values as slack_values
from renderers.slack import render_request
from renderers.text import render_text
from tests.fakes.slack_api import validate_blocks

BINDING = "3f9c2a1b0d4e" + "0" * 52


def card(args: dict[str, object], fixed: dict[str, object] | None = None) -> RequestCard:
    view = tool_card.tool_approval_view("restart_service", "Restart one service.", args,
                                        fixed or {}, BINDING)
    return tool_card.tool_approval_card("REF1", view, "ops")


def submitted(action: str, **values: object) -> AskHumanToolResult:
    return AskHumanToolResult(status="submitted", values=dict(values),  # type: ignore[arg-type]
                              action=AskHumanSelectedAction(id=action, label=action.title()))


@pytest.mark.parametrize(("result", "waited", "expected"), [
    (submitted("approve"), 5, ToolApproved()),
    (submitted("approve", reason="ok, go"), 5, ToolApproved()),
    (submitted("reject"), 5, ToolDenied(approval.REJECTED)),
    (submitted("reject", reason="  not now  "), 5,
     ToolDenied("The reviewer rejected this call: not now The action was not run.")),
    (timeout_result(), 1800, ToolDenied("No approval within 30m; the action was not run.")),
    (timeout_result(), 5400, ToolDenied("No approval within 1h 30m; the action was not run.")),
    (timeout_result(), 42, ToolDenied("No approval within 42s; the action was not run.")),
    (cancelled_result("Cancelled by Sam."), 600,
     ToolDenied("No approval within 10m; the action was not run. (Cancelled by Sam.)")),
    (unavailable_result("channel_not_found"), 1, ToolDenied(approval.UNREACHABLE)),
    (submitted("something_else"), 1, ToolDenied(approval.REJECTED)),
])
def test_the_mapping(result: AskHumanToolResult, waited: float, expected: object) -> None:
    assert approval.approval_result(result, waited) == expected


def test_the_engine_and_the_renderer_agree_on_ids() -> None:
    assert (approval.APPROVE, approval.REJECT, approval.REASON_FIELD) == (
        tool_card.APPROVE, tool_card.REJECT, tool_card.REASON_FIELD)


def test_card_lists_args_compactly_marks_fixed_collapses_long_and_shows_the_hash() -> None:
    shown = card({"service": "api", "opts": {"drain": True, "order": [1, 2]},
                  "script": "x" * 1000}, {"cluster": "prod-eu"})
    text = render_text(shown)
    assert "  service: api\n" in text
    assert '  opts: {"drain": true, "order": [1, 2]}\n' in text
    assert "  script: " + "x" * 300 + "… (+700 characters)" in text
    assert "  cluster: prod-eu (fixed by admin)" in text
    assert "Call hash: 3f9c2a1b0d4e" in text and BINDING not in text
    slack = render_request(shown)
    assert validate_blocks(slack["blocks"]) is None
    blob = json.dumps(slack)
    assert "*cluster*: prod-eu _(fixed by admin)_" in blob and "Call hash 3f9c2a1b0d4e" in blob
    feishu = json.dumps(render_card(shown), ensure_ascii=False)
    assert "cluster: prod-eu (fixed by admin)" in feishu and "Call hash 3f9c2a1b0d4e" in feishu


HOSTILE = {
    "slack_broadcast": "<!channel> <!here|here> <!everyone>",
    "slack_user": "<@U0ADMIN> and <#C0GENERAL>",
    "slack_link": "<javascript:alert(1)|Open dashboard> <https://evil.example|https://ok>",
    "feishu_at": "<at id=all></at> <at user_id=\"ou_1\">boss</at> @all",
    "md_link": "[Open](javascript:alert(1)) ![x](https://evil.example/x.png)",
    "nested": {"<!channel>": ["<at id=all></at>"]},
}


def test_hostile_values_are_inert_on_every_renderer() -> None:
    shown = card(HOSTILE)
    slack = render_request(shown)
    check_slack(slack)  # raises on any live mention / broadcast / link
    blob = json.dumps(slack)
    for raw in ("<!channel>", "<!here", "<@U0ADMIN>", "<#C0GENERAL>", "<javascript:",
                "<https://evil"):
        assert raw not in blob
    assert all(b["text"]["verbatim"] for b in slack["blocks"] if b["type"] == "section")
    feishu = render_card(shown)
    check_feishu(feishu)
    fblob = json.dumps(feishu, ensure_ascii=False)
    assert "<at " not in fblob and '"markdown"' not in fblob and '"lark_md"' not in fblob
    text = render_text(shown)
    check_plain(text)


def test_answers_are_read_and_checked_like_any_request() -> None:
    shown = card({"service": "api"})
    block = next(b for b in render_request(shown)["blocks"] if b["type"] == "input")
    values = slack_values({block["block_id"]: {"in": {"type": "plain_text_input",
                                                      "value": "too risky"}}}, shown)
    assert values == {"reason": "too risky"}
    assert feishu_values({"f_reason": "too risky"}, shown) == {"reason": "too risky"}
    action, clean = check_answer(shown.args, "reject", values)
    assert action.id == "reject" and clean == {"reason": "too risky"}
    action, clean = check_answer(shown.args, "approve", {})
    assert action.id == "approve" and clean == {}


def test_a_huge_value_is_stored_cut_and_shown_with_its_real_size() -> None:
    view = tool_card.tool_approval_view("t", "", {"blob": "z" * 100_000, "n": 1}, {}, BINDING)
    stored = tool_card.view_to_json(view)
    assert len(json.dumps(stored)) < 5000
    again = tool_card.view_from_json(stored)
    (blob, n) = tool_card.arg_lines(again)
    assert blob.text == "z" * 300 + "… (+99700 characters)" and blob.collapsed
    assert (n.text, n.collapsed) == ("1", False)
