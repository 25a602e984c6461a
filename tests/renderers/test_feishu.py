"""Feishu specifics: form layout, callback values, read_values."""

from __future__ import annotations

import dataclasses
import json

import pytest

from renderers import feishu, feishu_values
from tests.renderers.cases import make_card
from tests.renderers.helpers import assert_valid_feishu, walk


def test_form_and_buttons() -> None:
    card = feishu.render_card(make_card("incident"))
    assert_valid_feishu(card)
    assert card["header"]["template"] == "blue"
    form, menu = card["body"]["elements"][-2:]
    assert menu["tag"] == "overflow" and menu["options"][0]["value"] == "-withdraw"
    assert feishu_values.parse_callback_value(menu["behaviors"][0]["value"]) == (
        "req_incident_7f3a", "-withdraw")
    assert form["tag"] == "form"
    buttons = [d for d in walk(form) if d.get("tag") == "button"]
    assert [b["type"] for b in buttons] == ["primary_filled", "danger_filled", "default"]
    assert buttons[1]["confirm"]["title"]["content"]
    assert buttons[0]["behaviors"][0]["value"] == {"r": "req_incident_7f3a", "a": "ack"}
    multi = next(d for d in walk(form) if d.get("tag") == "multi_select_static")
    assert multi["required"] is False and multi["selected_values"] == ["o0"]


def test_header_colors_follow_state() -> None:
    assert feishu.render_card(make_card("deploy"))["header"]["template"] == "red"
    colors = {s: feishu.render_card(make_card("deploy", s))["header"]["template"]
              for s in ("submitted", "timeout", "cancelled")}
    assert colors == {"submitted": "green", "timeout": "orange", "cancelled": "grey"}


def test_parse_callback_value() -> None:
    assert feishu_values.parse_callback_value({"r": "x", "a": "approve"}) == ("x", "approve")
    assert feishu_values.parse_callback_value('{"r": "x", "a": "approve"}') == ("x", "approve")
    assert feishu_values.parse_callback_value({"r": "x", "a": "bad id"}) is None
    assert feishu_values.parse_callback_value("garbage") is None
    assert feishu_values.parse_callback_value(None) is None


def test_parse_callback_value_refuses_oversize_refs_and_ids() -> None:
    assert feishu_values.parse_callback_value({"r": "r" * 65, "a": "approve"}) is None
    assert feishu_values.parse_callback_value({"r": "r" * 5_000_000, "a": "approve"}) is None
    assert feishu_values.parse_callback_value({"r": "ref", "a": "a" * 256}) is None
    longest = {"r": "r" * 64, "a": "a" * 255}
    assert feishu_values.parse_callback_value(longest) == ("r" * 64, "a" * 255)


def test_read_values() -> None:
    card = make_card("incident")
    form = {"f_services": ["o1", "o9"], "f_postmortem": "2025-04-01 +0800",
            "f_customer_facing": "false", "other": 1}
    # "o9" was never offered: it is passed on raw so the engine refuses it loudly.
    assert feishu_values.read_values(form, card) == {
        "services": ["auth", "o9"], "postmortem": "2025-04-01", "customer_facing": False}
    facing = feishu_values.read_values({"f_customer_facing": True}, card.args)
    assert facing == {"customer_facing": True}
    assert feishu_values.read_values({"f_postmortem": "soon"}, card) == {}
    refund = make_card("refund")
    assert feishu_values.read_values({"f_amount": "7", "f_reason": " "}, refund) == {"amount": "7"}
    assert feishu_values.read_values(None, refund) == {}


def test_file_fields_explain_thread_reply() -> None:
    from bot.askhuman.schema import AskHumanToolArgs
    from renderers.card import RequestCard

    args = AskHumanToolArgs.model_validate({"question": "q", "fields": [
        {"name": "doc", "label": "Contract", "type": "file"}]})
    card = feishu.render_card(RequestCard(ref="r", args=args, agent_name="a"))
    assert "reply in this card's thread" in str(card)


@pytest.mark.parametrize("uid", [
    "all", "@all", "ou_x></at><at id=all>", "ou_", "ou_abc def", "ou_abc\n",
    "alice@example.com", "U024BE7LH", "on_union", "ou_" + "a" * 65, "<at id=all></at>",
])
def test_decider_mention_is_only_ever_a_well_formed_open_id(uid: str) -> None:
    card = dataclasses.replace(make_card("deploy", "submitted"), decided_by_id=uid,
                               decided_by_name=None, decided_by_platform="feishu")
    assert feishu.decider_mention(card) is None
    rendered = feishu.render_card(card)
    assert_valid_feishu(rendered)
    assert "<at" not in json.dumps(rendered["body"])


def test_decider_mention_names_feishu_deciders_only() -> None:
    card = dataclasses.replace(make_card("deploy", "submitted"), decided_by_id="ou_7f3a",
                               decided_by_name=None, decided_by_platform="feishu")
    assert feishu.decider_mention(card) == "<at id=ou_7f3a></at>"
    from_slack = dataclasses.replace(card, decided_by_platform="slack")
    assert feishu.decider_mention(from_slack) is None
    pending = dataclasses.replace(card, status="pending", decided_by_id=None)
    assert feishu.decider_mention(pending) is None


def test_decision_line_escapes_everything_but_the_mention() -> None:
    card = dataclasses.replace(make_card("deploy", "submitted"), decided_by_id="ou_7f3a",
                               decided_by_name=None, decided_by_platform="feishu",
                               action_label="<at id=all></at> [x](javascript:alert(1))")
    rendered = feishu.render_card(card)
    assert_valid_feishu(rendered, allowed=("<at id=ou_7f3a></at>",))
    line = next(e["content"] for e in rendered["body"]["elements"]
                if e.get("tag") == "markdown" and "ou_7f3a" in e["content"])
    assert line.count("<at") == 1 and "&#60;at id=all" in line and "](" not in line
