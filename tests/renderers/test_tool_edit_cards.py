"""The edit inputs and the diff line of a tool card: typed from the schema, prefilled,
and model-written values kept as plain text on every renderer."""

from __future__ import annotations

import json

from renderers.card import ToolEdit
from renderers.feishu import render_card
from renderers.slack import edit_modal, render_request
from renderers.text import render_text
from renderers.tool_card import tool_approval_card, tool_approval_view
from renderers.tool_edits import edit_fields

SCHEMA = {"type": "object", "properties": {
    "replicas": {"type": "integer", "minimum": 1, "maximum": 20},
    "mode": {"enum": ["fast", "safe"]}, "dry_run": {"type": "boolean"},
    "note": {"type": "string"}, "labels": {"type": "array", "items": {"type": "string"}}}}
HOSTILE = "<!channel> <at id=all></at> [x](javascript:alert(1))"


def _card(edit: ToolEdit | None = None):  # type: ignore[no-untyped-def]
    args = {"replicas": 10, "mode": "fast", "dry_run": True, "note": HOSTILE,
            "labels": ["a"]}
    view = tool_approval_view("scale", "", args, {"cluster": "prod"}, "ab" * 32,
                              editable=tuple(SCHEMA["properties"]), schema=SCHEMA)
    if edit is not None:
        from dataclasses import replace
        view = replace(view, edit=edit)
    return tool_approval_card("REF1234567890ABC", view, "ops")


def test_each_editable_argument_gets_a_typed_prefilled_input() -> None:
    fields = {f.label: f for f in edit_fields(_card().tool)}  # type: ignore[arg-type]
    assert fields["replicas"].type == "number" and fields["replicas"].default == 10
    assert (fields["replicas"].min_value, fields["replicas"].max_value) == (1, 20)
    assert fields["mode"].type == "select" and fields["mode"].default == "fast"
    assert fields["dry_run"].type == "checkbox" and fields["dry_run"].default is True
    assert fields["note"].type == "paragraph" and fields["note"].default == HOSTILE
    assert fields["labels"].type == "paragraph" and fields["labels"].default == '["a"]'
    modal = edit_modal(_card(), "C1", "1.2")
    kinds = [b["element"]["type"] for b in modal["blocks"] if b["type"] == "input"]
    assert kinds == ["number_input", "static_select", "checkboxes", "plain_text_input",
                     "plain_text_input", "plain_text_input"]  # the last one: the reason


def _texts(node: object) -> list[str]:
    """Every ``div`` text of a Feishu card (inputs' prefilled values are not parsed)."""
    if isinstance(node, dict):
        own = [node["text"]["content"]] if node.get("tag") == "div" else []
        return own + [t for v in node.values() for t in _texts(v)]
    if isinstance(node, list):
        return [t for v in node for t in _texts(v)]
    return []


def test_the_diff_is_shown_as_plain_text_everywhere() -> None:
    card = _card(ToolEdit({"note": "old"}, {"note": HOSTILE}, "Mallory <!here>"))
    slack = json.dumps(render_request(card)["blocks"], ensure_ascii=False)
    assert "<!channel>" not in slack and "<!here>" not in slack
    assert "note: old → &lt;!channel&gt;" in slack
    feishu = render_card(card)
    [line] = [t for t in _texts(feishu) if "edited by" in t]
    assert "note: old → " in line and "<at id=all>" not in line
    assert "edited by Mallory" in render_text(card)


def test_app_home_lists_the_card_without_the_edit_button() -> None:
    from renderers.home import home_view

    on_card = json.dumps(render_request(_card())["blocks"])
    assert '"action_id": "ahe:REF1234567890ABC"' in on_card
    home = json.dumps(home_view([_card()], 1, []))
    assert "ahe:" not in home and "Approve" in home and "Reject" in home
