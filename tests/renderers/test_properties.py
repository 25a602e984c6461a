"""Property tests: any valid request renders validly, safely, and reads back its defaults."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.askhuman.schema import AskHumanToolArgs
from renderers import feishu, feishu_values, slack, text
from renderers.card import RequestCard
from tests.renderers.helpers import (
    assert_valid_feishu,
    assert_valid_slack,
    feishu_form_from_card,
    slack_state_from_blocks,
)
from tests.renderers.strategies import hostile, tool_args

FAST = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
WHEN = dt.datetime(2025, 1, 2, 3, 4, tzinfo=dt.UTC)


def _card(args: AskHumanToolArgs, **changes: Any) -> RequestCard:
    card = RequestCard(ref="r_abc", args=args, agent_name="agent <!here>", deadline=WHEN)
    return dataclasses.replace(card, **changes)


def _kept(kind: str, default: object) -> bool:
    """Select/date defaults come back as-is; paragraphs only when not blank."""
    if kind == "paragraph":
        return isinstance(default, str) and bool(default.strip())
    return kind in ("select", "date") and default is not None


def expected_defaults(args: AskHumanToolArgs) -> dict[str, Any]:
    """The values an untouched prefilled card must read back as."""
    out: dict[str, Any] = {}
    for f in args.fields:
        default = getattr(f, "default", None)
        if f.type == "checkbox":
            out[f.name] = bool(default)
        elif f.type == "number" and default is not None:
            out[f.name] = str(default)
        elif _kept(f.type, default):
            out[f.name] = default
        elif f.type == "multi-select" and default:
            out[f.name] = [o.value for o in f.options if o.value in default]
    return out


@FAST
@given(tool_args())
def test_slack_pending_is_valid_safe_and_inverts(args: AskHumanToolArgs) -> None:
    card = _card(args)
    payload = slack.render_request(card)
    assert_valid_slack(payload)
    state = slack_state_from_blocks(payload["blocks"])
    assert slack.read_values(state, card) == expected_defaults(args)
    for action in args.actions:
        aid = slack.action_id_for(card.ref, args, action)
        parsed = slack.parse_action_id(aid)
        assert parsed is not None and parsed[0] == card.ref
        assert slack.resolve_action(args, parsed[1]) == action


@FAST
@given(tool_args())
def test_feishu_pending_is_valid_safe_and_inverts(args: AskHumanToolArgs) -> None:
    card = _card(args)
    rendered = feishu.render_card(card)
    assert_valid_feishu(rendered)
    form = feishu_form_from_card(rendered)
    assert feishu_values.read_values(form, card) == expected_defaults(args)


@FAST
@given(tool_args(), st.sampled_from(["submitted", "timeout", "cancelled", "unavailable"]),
       hostile(300),
       st.sampled_from(["U024BE7LH", "<!channel>", "W1", "ou_7f3a9c", "all", "@all",
                        "ou_x></at><at id=all>", "ou_", None]),
       st.sampled_from([None, "slack", "feishu", "console"]))
def test_decided_states_are_valid_and_safe(
    args: AskHumanToolArgs, status: str, message: str, uid: str | None, platform: str | None
) -> None:
    values = {f.name: message for f in args.fields}
    card = _card(args, status=status, decided_by_id=uid, decided_by_name=message,
                 decided_by_platform=platform, decided_at=WHEN, action_id=args.actions[0].id,
                 action_label=args.actions[0].label, values=values, message=message, version=3)
    payload = slack.render_request(card)
    slack_ok = uid in ("U024BE7LH", "W1") and platform in (None, "slack")
    assert_valid_slack(payload, (f"<@{uid}>",) if slack_ok else ())
    assert not any(b["type"] in ("input", "actions") for b in payload["blocks"])
    rendered = feishu.render_card(card)
    feishu_ok = uid == "ou_7f3a9c" and platform in (None, "feishu")
    assert_valid_feishu(rendered, (f"<at id={uid}></at>",) if feishu_ok else ())
    assert ("<at id=" in json.dumps(rendered)) == feishu_ok
    assert "form" not in _tags(rendered["body"])  # no inputs left (text may say "form")
    text.render_text(card)


def _tags(node: Any) -> set[str]:
    """Every component ``tag`` in a Feishu card subtree."""
    if isinstance(node, dict):
        own = {node["tag"]} if isinstance(node.get("tag"), str) else set()
        return own.union(*(_tags(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_tags(v) for v in node))
    return set()


@FAST
@given(tool_args())
def test_text_rendering_is_plain_and_safe(args: AskHumanToolArgs) -> None:
    out = text.render_text(_card(args))
    assert "\x1b" not in out and "\u202e" not in out
    for i, _ in enumerate(args.actions, 1):
        assert f"  {i}. " in out
