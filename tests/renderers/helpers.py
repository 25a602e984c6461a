"""Independent validators for rendered output (tests must not trust the renderer's own checks)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

_SLACK_PING = re.compile(r"<\s*[!@#]|@(?:here|channel|everyone)", re.IGNORECASE)
_FEISHU_PING = re.compile(r"<\s*/?\s*(?:at|a|link|font|person)\b|@(?:all|here|everyone)", re.I)
_MD_LINK = re.compile(r"\]\(([^)\s]*)\)")
_SLACK_LINK = re.compile(r"<([^|>]+)(?:\|[^>]*)?>")
FEISHU_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,19}$")


def walk(obj: Any) -> Iterable[dict[str, Any]]:
    """Every dict in a JSON tree."""
    if isinstance(obj, dict):
        yield obj
        for value in obj.values():
            yield from walk(value)
    elif isinstance(obj, list):
        for item in obj:
            yield from walk(item)


def slack_texts(payload: Any) -> list[str]:
    """The text a person sees: every Slack text object, plus the fallback text."""
    texts = [d["text"] for d in walk(payload) if d.get("type") in ("plain_text", "mrkdwn")]
    if isinstance(payload, dict) and isinstance(payload.get("text"), str):
        texts.append(payload["text"])
    return texts


def feishu_texts(card: Any) -> list[str]:
    """Every Feishu text content (plain_text and markdown) and the chat-list summary."""
    texts = [d["content"] for d in walk(card) if d.get("tag") in ("plain_text", "markdown")]
    return [*texts, card["config"]["summary"]["content"]]


def assert_slack_no_pings(payload: Any, allowed: Iterable[str] = ()) -> None:
    for text in slack_texts(payload):
        for mention in allowed:
            text = text.replace(mention, "")
        assert not _SLACK_PING.search(text), text[:500]
    parsed = [d["text"] for d in walk(payload) if d.get("type") == "mrkdwn"]
    if isinstance(payload, dict) and isinstance(payload.get("text"), str):
        parsed.append(payload["text"])
    for text in parsed:
        for mention in allowed:
            text = text.replace(mention, "")
        for target in _SLACK_LINK.findall(text):
            assert re.match(r"(?i)(https?|mailto):", target), target


def assert_feishu_no_pings(card: Any, allowed: Iterable[str] = ()) -> None:
    for text in feishu_texts(card):
        for mention in allowed:
            text = text.replace(mention, "")
        assert not _FEISHU_PING.search(text), text[:500]
    for d in walk(card):
        if d.get("tag") == "markdown":
            for url in _MD_LINK.findall(d["content"]):
                assert re.match(r"(?i)(https?|mailto):", url), url


def total_chars(blocks: Any) -> int:
    return sum(len(d["text"]) for d in walk(blocks) if isinstance(d.get("text"), str))


def assert_valid_slack(payload: dict[str, Any], allowed: Iterable[str] = ()) -> None:
    """slack-sdk's own models, plus the limits slack-sdk does not check."""
    blocks = payload["blocks"]
    assert 1 <= len(blocks) <= 50
    assert 0 < len(payload["text"]) <= 4000
    for block in blocks:
        parsed = Block.parse(block)
        assert parsed is not None, block
        parsed.to_dict()
    assert total_chars(blocks) <= 12000
    ids = [b["block_id"] for b in blocks if "block_id" in b]
    assert len(ids) == len(set(ids))
    for d in walk(blocks):
        _check_slack_object(d)
    assert_slack_no_pings(payload, allowed)


def _check_slack_object(d: dict[str, Any]) -> None:
    kind = d.get("type")
    if kind in ("plain_text", "mrkdwn"):
        assert d["text"], d
    if kind == "mrkdwn":
        assert d.get("verbatim") is True
    if kind == "header":
        assert d["text"]["type"] == "plain_text" and len(d["text"]["text"]) <= 150
    if kind == "section":
        assert len(d["text"]["text"]) <= 3000
    if kind in ("static_select", "multi_static_select"):
        assert 1 <= len(d["options"]) <= 100
        for option in d["options"]:
            assert len(option["text"]["text"]) <= 75 and len(option["value"]) <= 150
    if kind == "checkboxes":
        assert 1 <= len(d["options"]) <= 10
    if kind == "button":
        assert len(d["text"]["text"]) <= 75 and len(d["value"]) <= 2000
        assert len(d["action_id"]) <= 255
    if kind == "plain_text_input":
        assert len(d.get("initial_value", "")) <= 3000
    if kind == "input":
        assert len(d["label"]["text"]) <= 2000


def assert_valid_view(view: dict[str, Any]) -> None:
    View(**view).to_dict()
    assert len(view["private_metadata"]) <= 3000
    assert_slack_no_pings(view)


def assert_valid_feishu(card: dict[str, Any], allowed: Iterable[str] = ()) -> None:
    """Card JSON 2.0 structure and Feishu's limits."""
    assert card["schema"] == "2.0" and card["config"]["update_multi"] is True
    assert len(json.dumps(card, ensure_ascii=False).encode()) <= 25_000
    tagged = [d for d in walk(card) if "tag" in d and d["tag"] not in ("plain_text", "lark_md")]
    assert len(tagged) <= 200
    names = [d["name"] for d in tagged if "name" in d]
    assert len(names) == len(set(names))
    for d in walk(card):
        if "element_id" in d:
            assert FEISHU_NAME.match(d["element_id"])
    forms = [d for d in card["body"]["elements"] if d.get("tag") == "form"]
    for form in forms:
        buttons = [d for d in walk(form) if d.get("tag") == "button"]
        assert any(b.get("form_action_type") == "submit" for b in buttons)
        for b in buttons:
            assert b["name"] and b["behaviors"][0]["type"] == "callback"
            assert isinstance(b["behaviors"][0]["value"], dict)
            if "confirm" in b:
                assert b["confirm"]["title"]["content"]
    assert not any(d.get("tag") == "form" for f in forms for d in walk(f["elements"]))
    assert_feishu_no_pings(card, allowed)


def slack_state_from_blocks(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """What Slack would send in state.values if nobody touched the prefilled inputs."""
    state: dict[str, Any] = {}
    for block in blocks:
        if block["type"] != "input":
            continue
        el = block["element"]
        kind = el["type"]
        if kind == "plain_text_input":
            value: dict[str, Any] = {"value": el.get("initial_value")}
        elif kind == "static_select":
            value = {"selected_option": el.get("initial_option")}
        elif kind in ("multi_static_select", "checkboxes"):
            value = {"selected_options": el.get("initial_options", [])}
        elif kind == "datepicker":
            value = {"selected_date": el.get("initial_date")}
        else:
            value = {"files": []}
        state[block["block_id"]] = {el["action_id"]: {"type": kind, **value}}
    return state


def feishu_form_from_card(card: dict[str, Any]) -> dict[str, Any]:
    """What Feishu would send as form_value for an untouched, prefilled form."""
    form: dict[str, Any] = {}
    for d in walk(card):
        tag, name = d.get("tag"), d.get("name")
        if not name or tag in ("button", "form"):
            continue
        if tag == "input" and "default_value" in d:
            form[name] = d["default_value"]
        elif tag == "select_static" and "initial_option" in d:
            form[name] = d["initial_option"]
        elif tag == "multi_select_static":
            form[name] = d.get("selected_values", [])
        elif tag == "checker":
            form[name] = d["checked"]
        elif tag == "date_picker" and "initial_date" in d:
            form[name] = d["initial_date"] + " +0800"
    return form
