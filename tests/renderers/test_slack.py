"""Slack specifics: ids, versions, read_values, file modal, limits."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from bot.askhuman.schema import AskHumanToolArgs
from renderers import slack
from renderers.card import RequestCard
from tests.renderers.cases import make_card
from tests.renderers.helpers import assert_valid_slack, assert_valid_view


def _args(**extra: Any) -> AskHumanToolArgs:
    return AskHumanToolArgs.model_validate({
        "question": "Pick",
        "fields": [
            {"name": "env", "label": "Env", "type": "select",
             "options": [{"value": "v" * 200, "label": "L" * 100}, {"value": "b", "label": "B"}]},
            {"name": "docs", "label": "Docs", "type": "file-list", "max_files": 30},
            {"name": "ok", "label": "OK", "type": "checkbox"},
        ],
        "actions": [{"id": "go", "label": "G" * 120, "style": "destructive"}],
        **extra,
    })


def test_buttons_carry_only_ref_and_action() -> None:
    card = make_card("deploy")
    actions = next(b for b in slack.render_request(card)["blocks"] if b["type"] == "actions")
    approve, reject, menu = actions["elements"]
    assert menu["type"] == "overflow" and menu["action_id"] == "ahw:req_deploy_7f3a"
    assert slack.parse_withdraw_action_id(menu["action_id"]) == "req_deploy_7f3a"
    assert slack.parse_withdraw_action_id("ahw:") is None
    assert slack.parse_withdraw_action_id("ah:req_deploy_7f3a:approve") is None
    assert approve["action_id"] == approve["value"] == "ah:req_deploy_7f3a:approve"
    assert approve["style"] == "primary" and reject["style"] == "danger"
    assert "confirm" in reject and "confirm" not in approve
    assert slack.parse_action_id(reject["value"]) == ("req_deploy_7f3a", "reject")
    assert slack.parse_action_id("other:thing") is None
    assert slack.ACTION_ID_PATTERN.match(approve["action_id"])


def test_block_ids_change_with_version() -> None:
    card = make_card("incident")
    v1 = {b.get("block_id") for b in slack.render_request(card)["blocks"]}
    card2 = dataclasses.replace(card, version=2)
    v2 = {b.get("block_id") for b in slack.render_request(card2)["blocks"]}
    assert "v1:services" in v1 and "v2:services" in v2 and not (v1 & v2) - {None}


def test_long_values_labels_and_truncation() -> None:
    card = RequestCard(ref="r", args=_args(), agent_name="a")
    payload = slack.render_request(card)
    assert_valid_slack(payload)
    select = next(b for b in payload["blocks"] if b.get("block_id") == "v1:env")["element"]
    assert select["options"][0]["value"] == "o0"
    assert select["options"][0]["text"]["text"].endswith("…")
    state = {"v1:env": {"in": {"type": "static_select", "selected_option": select["options"][0]}}}
    assert slack.read_values(state, card) == {"env": "v" * 200}


def test_read_values_all_types_and_versions() -> None:
    card = dataclasses.replace(make_card("incident"), version=3)
    state = {
        "v2:services": {"in": {"type": "multi_static_select",
                               "selected_options": [{"value": "o2"}]}},
        "v3:services": {"in": {"type": "multi_static_select",
                               "selected_options": [{"value": "o0"}, {"value": "o1"}]}},
        "v1:postmortem": {"in": {"type": "datepicker", "selected_date": "2025-04-01"}},
        "v4:customer_facing": {"in": {"type": "checkboxes", "selected_options": []}},
        "v3:customer_facing": {"in": {"type": "checkboxes",
                                      "selected_options": [{"value": "true"}]}},
        "v3:unknown": {"in": {"type": "plain_text_input", "value": "x"}},
        "junk": {},
    }
    assert slack.read_values(state, card) == {
        "services": ["gateway", "auth"], "postmortem": "2025-04-01", "customer_facing": True,
    }
    # With bare args there is no current version: the newest block wins.
    assert slack.read_values(state, card.args)["customer_facing"] is False


def test_read_values_text_number_and_empty() -> None:
    card = make_card("refund")
    state = {
        "v1:amount": {"in": {"type": "plain_text_input", "value": " 12.50 "}},
        "v1:reason": {"in": {"type": "plain_text_input", "value": ""}},
    }
    assert slack.read_values(state, card) == {"amount": " 12.50 "}


def test_file_button_modal_and_metadata() -> None:
    card = RequestCard(ref="r:1", args=_args(), agent_name="a")
    payload = slack.render_request(card)
    button = next(b for b in payload["blocks"] if b["type"] == "section" and "accessory" in b)
    assert slack.parse_file_action_id(button["accessory"]["action_id"]) == ("r:1", "docs")
    view = slack.file_modal(card, "C1", "123.456", field_name="docs", action_id="go")
    assert_valid_view(view)
    element = view["blocks"][0]["element"]
    assert element["type"] == "file_input" and element["max_files"] == 10
    ctx = slack.parse_private_metadata(view["private_metadata"])
    assert ctx == slack.ModalContext("r:1", "C1", "123.456", "docs", "go")
    assert slack.parse_private_metadata("nope") is None
    assert slack.parse_private_metadata('{"r": 1}') is None
    files = [{"id": "F1", "name": "a.pdf", "mimetype": "application/pdf", "size": 10,
              "url_private_download": "https://files.slack.com/F1"}]
    state = {view["blocks"][0]["block_id"]: {"in": {"type": "file_input", "files": files}}}
    assert slack.read_values(state, card) == {"docs": [{
        "platform": "slack", "id": "F1", "name": "a.pdf", "mimetype": "application/pdf",
        "size": 10, "url": "https://files.slack.com/F1"}]}


def test_decided_state_mentions_only_valid_ids() -> None:
    base = make_card("deploy", "submitted")
    good = slack.render_request(base)
    assert "<@U024BE7LH>" in str(good["blocks"])
    bad = slack.render_request(dataclasses.replace(base, decided_by_id="U1> <!channel"))
    assert "<@" not in str(bad["blocks"]) and "Alice Chen" in str(bad["blocks"])
    assert not any(b["type"] in ("input", "actions") for b in good["blocks"])


def test_forged_ids_metadata_and_files_never_raise() -> None:
    """Parsing a forged payload gives None or a value the engine refuses, never an
    exception (which would become a generic "something went wrong")."""
    card = make_card("incident")
    big = "o" + "9" * 5000
    state = {
        "v1:services": {"in": {"type": "multi_static_select",
                               "selected_options": [{"value": big}, {"value": "o\u00b2"}]}},
        "v" + "9" * 5000 + ":postmortem": {"in": {"type": "datepicker",
                                                  "selected_date": "2025-04-01"}},
        "v1:#" + "9" * 5000: {"in": {"type": "plain_text_input", "value": "x"}},
    }
    assert slack.read_values(state, card) == {"services": [big, "o\u00b2"]}
    assert slack.resolve_action(card.args, "#" + "9" * 5000) is None
    assert slack.parse_action_id("ah:" + "r" * 5000 + ":approve") is None
    assert slack.parse_action_id("ah:" + "r" * 100 + ":approve") is None
    huge = '{"r": "' + "r" * 3_000_000 + '", "c": "C1", "t": "1.2"}'
    assert slack.parse_private_metadata(huge) is None
    assert slack.parse_private_metadata('{"r": "' + "r" * 65 + '", "c": "C", "t": "1"}') is None
    docs = RequestCard(ref="r:1", args=_args(), agent_name="a")
    bid = slack.file_modal(docs, "C1", "1.2", field_name="docs")["blocks"][0]["block_id"]
    files = [{"id": "F1", "name": "a.pdf", "size": "lots"}, {"id": "F2", "size": True}]
    values = slack.read_values({bid: {"in": {"type": "file_input", "files": files}}}, docs)
    assert [f["size"] for f in values["docs"]] == [None, None]  # type: ignore[index, union-attr]


def test_decider_mention_only_for_slack_deciders() -> None:
    card = make_card("deploy", "submitted")
    on_slack = dataclasses.replace(card, decided_by_platform="slack")
    assert "by <@U024BE7LH>" in json.dumps(slack.render_request(on_slack))
    on_feishu = dataclasses.replace(card, decided_by_id="ou_7f3a", decided_by_name=None,
                                    decided_by_platform="feishu")
    rendered = json.dumps(slack.render_request(on_feishu))
    assert "by someone on Feishu" in rendered and "ou_7f3a" not in rendered
    assert "<@" not in rendered
