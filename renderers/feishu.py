"""RequestCard → Feishu/Lark Card JSON 2.0, and card callbacks → contract values.

Untrusted text goes into ``plain_text`` elements wherever formatting adds
nothing, because ``lark_md``/``markdown`` parse ``<at id=all>``; only the Markdown
body uses a ``markdown`` element, fully escaped by ``renderers.markdown``.

Identifier scheme (only this module knows it): form field names are
``f_{field name}``, buttons ``b_{index}``, option values ``o{index}``, and each
submit button's callback value is ``{"r": ref, "a": action id}``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import JsonValue

from bot.askhuman.schema import (
    AskHumanAction,
    AskHumanField,
    AskHumanToolArgs,
    CheckboxField,
    DateField,
    FileField,
    FileListField,
    MultiSelectField,
    NumberField,
    ParagraphField,
    SelectField,
    is_identifier,
)
from renderers import i18n
from renderers.budget import Budget, ladder
from renderers.card import (
    MAX_REF_CHARS,
    WITHDRAW_TOKEN,
    RequestCard,
    args_of,
    option_token,
    option_value,
    progress_text,
)
from renderers.markdown import (
    FEISHU,
    check_feishu,
    feishu_escape,
    markdown_chunks,
    plain,
    truncate,
)
from renderers.text import (
    decision_parts,
    decision_words,
    field_hint,
    format_when,
    summary,
    value_lines,
    waiting_notes,
)
from renderers.tool_card import arg_lines, arg_text, edit_line
from renderers.tool_edits import edit_fields, named_edits

Element = dict[str, Any]

MAX_ELEMENTS = 200
MAX_BYTES = 25_000
"""Feishu rejects cards over 30 KB and style tags grow the stored size; keep margin."""
MARKDOWN_CHUNK = 4000
INPUT_MAX_LENGTH = 1000
MAX_ID_CHARS = 255
"""Longest action id a callback may name (longer ones were never on a card)."""
FORM_NAME = "askhuman_form"
_TEMPLATES = {
    ("pending", "normal"): "blue",
    ("pending", "high"): "red",
    "submitted": "green",
    "timeout": "orange",
    "cancelled": "grey",
    "unavailable": "yellow",
}
_BUTTON_TYPES = {"primary": "primary_filled", "destructive": "danger_filled", "default": "default"}
_TEXT_TAGS = frozenset({"plain_text", "lark_md"})
OPEN_ID = re.compile(r"ou_[A-Za-z0-9]{1,64}", re.ASCII)
"""A Feishu open_id as callbacks carry it (real ones: ``ou_`` + 32 hex digits)."""


_OPTION_BYTES = 50
"""Bytes each select option adds to the card besides its label (61 in fact: the
``text``/``tag``/``content``/``value`` keys and punctuation); a floor for ``ladder``."""

_LADDER = (
    Budget(4000, 12000, 200, 100, 100, 1000),
    Budget(3000, 6000, 120, 50, 60, 500),
    Budget(2000, 3000, 80, 20, 40, 300),
    Budget(1000, 1500, 60, 10, 30, 200),
    Budget(500, 500, 40, 5, 20, 100),
    Budget(200, 200, 30, 3, 12, 50),
)


def _text(content: str, limit: int) -> dict[str, Any]:
    return {"tag": "plain_text", "content": plain(content, limit) or "…"}


def _div(content: str, limit: int) -> Element:
    return {"tag": "div", "text": _text(content, limit)}


def field_key(field: AskHumanField) -> str:
    """The form ``name`` of a field (prefixed so it never collides with buttons)."""
    return f"f_{field.name}"


# ---------------------------------------------------------------- public rendering


@i18n.localized
def render_card(card: RequestCard) -> dict[str, Any]:
    """The Card JSON 2.0 for any status, shrunk step by step until within limits."""
    for budget in ladder(_LADDER, card.args, MAX_BYTES, per_option=_OPTION_BYTES):
        result = _card(card, budget)
        if card_size(result) <= MAX_BYTES and count_elements(result) <= MAX_ELEMENTS:
            break
    mention = (decider_mention(card) or _delegate_mention(card)) if card.status != "pending" \
        else None
    check_feishu(result, allowed_mentions=(mention,) if mention else ())
    return result


def card_size(card: Mapping[str, Any]) -> int:
    """Bytes as Feishu measures them (UTF-8, no ASCII escaping)."""
    return len(json.dumps(card, ensure_ascii=False).encode())


def count_elements(obj: object) -> int:
    """Components in the card: every tagged object except bare text objects.

    Iterative, and it skips select ``options`` (plain option objects, never
    components): a big card has hundreds of them, and this runs on every render.
    """
    count, stack = 0, [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            tag = item.get("tag")
            count += tag is not None and tag not in _TEXT_TAGS
            stack.extend(v for k, v in item.items() if k != "options" or tag is None)
        elif isinstance(item, list):
            stack.extend(item)
    return count


def _card(card: RequestCard, budget: Budget) -> dict[str, Any]:
    elements = _head_elements(card, budget)
    progress = progress_text(card, i18n.t) if card.status == "pending" else None
    if progress:
        elements.append(_div(progress, 2000))
    if card.status == "pending":
        elements += [_form(card, budget), _withdraw_menu(card)]
    else:
        elements += _decision_elements(card, budget)
    return {
        "schema": "2.0",
        "config": {"update_multi": True, "summary": {"content": summary(card)}},
        "header": _header(card),
        "body": {"elements": elements},
    }


def _header(card: RequestCard) -> dict[str, Any]:
    args = card.args
    key: object = (card.status, args.urgency) if card.status == "pending" else card.status
    sub = i18n.t("from", agent=card.agent_name)
    if args.urgency == "high":
        sub = i18n.t("urgent") + " · " + sub
    if card.deadline:
        sub += " · " + i18n.t("due", when=format_when(card.deadline))
    if card.quorum > 1 and not card.responses:  # else the body says who voted what
        sub += " · " + i18n.t("votes", votes=card.votes, quorum=card.quorum)
    if card.tool is not None:
        sub += " · " + i18n.t("call_hash", hash=card.tool.short_binding)
    sub += "".join(" · " + note for note in waiting_notes(card))
    return {
        "title": _text(args.title or args.question, 150),
        "subtitle": _text(sub, 200),
        "template": _TEMPLATES.get(key, "blue"),  # type: ignore[call-overload]
    }


def _head_elements(card: RequestCard, budget: Budget) -> list[Element]:
    if card.tool is not None:
        return _tool_elements(card, budget)
    args = card.args
    elements: list[Element] = []
    if args.title or len(args.question) > 150:
        elements.append(_div(args.question, budget.question))
    if args.markdown:
        chunks = markdown_chunks(args.markdown, FEISHU, MARKDOWN_CHUNK, budget.body)
        elements += [{"tag": "markdown", "content": c} for c in chunks]
    return elements


def _tool_elements(card: RequestCard, budget: Budget) -> list[Element]:
    """The tool call to approve, every name and value in ``plain_text`` (never parsed)."""
    view = card.tool
    assert view is not None
    intro = i18n.t("tool.wants_to_run", agent=card.agent_name, tool=view.tool)
    if view.description:
        intro += "\n" + view.description
    lines = [arg_text(line) for line in arg_lines(view, max(40, min(300, budget.default)))]
    edited = edit_line(view)
    if edited:
        lines.append("✎ " + edited)
    return [
        _div(intro, min(budget.question, 1200)),
        _div("\n".join(f"• {line}" for line in lines) or i18n.t("no_arguments"), budget.body),
    ]


# ---------------------------------------------------------------- form


def _form(card: RequestCard, budget: Budget) -> Element:
    """All inputs and one submit button per action, so one click sends every value."""
    elements: list[Element] = []
    if card.tool is not None and card.tool.editable and card.status == "pending":
        for field in edit_fields(card.tool):  # "Edit and approve" sends them, prefilled
            elements += _field_elements(field, budget)
    for field in card.args.fields:
        elements += _field_elements(field, budget)
    columns = [
        {"tag": "column", "width": "auto", "elements": [_button(card, i, a, budget)]}
        for i, a in enumerate(card.args.actions)
    ]
    elements.append({"tag": "column_set", "flex_mode": "flow", "columns": columns})
    return {"tag": "form", "name": FORM_NAME, "elements": elements}


def _field_elements(field: AskHumanField, budget: Budget) -> list[Element]:
    label = field.label + (i18n.t("required") if field.required else "")
    if isinstance(field, FileField | FileListField):
        how = f"📎 {label} — {field_hint(field)}: " + i18n.t("feishu.file_reply")
        return [_div(how, budget.label + 120)]
    if isinstance(field, CheckboxField):
        box = {"tag": "checker", "name": field_key(field), "checked": bool(field.default)}
        return [{**box, "text": _text(label, budget.label + 11)}]
    return [_div(label, budget.label + 11), _input(field, budget)]


def _input(field: AskHumanField, budget: Budget) -> Element:
    """The form component for a paragraph, number, select, multi-select or date field."""
    el: Element = {"name": field_key(field), "required": field.required}
    if isinstance(field, ParagraphField | NumberField):
        paragraph = isinstance(field, ParagraphField)
        el.update(tag="input", input_type="multiline_text" if paragraph else "text")
        el["max_length"] = INPUT_MAX_LENGTH
        hint = field.placeholder or ("" if paragraph else field_hint(field))
        if hint:
            el["placeholder"] = _text(hint, min(budget.label, 100))
        if field.default is not None and str(field.default) != "":
            el["default_value"] = truncate(str(field.default), min(budget.default, 1000))
    elif isinstance(field, SelectField | MultiSelectField):
        _select(el, field, budget)
    elif isinstance(field, DateField):
        el.update(tag="date_picker", placeholder=_text(i18n.t("pick_date"), 50))
        if field.default:
            el["initial_date"] = field.default
    return {"tag": el.pop("tag"), **el}


def _select(el: Element, field: SelectField | MultiSelectField, budget: Budget) -> None:
    shown = list(enumerate(field.options[: budget.options]))
    multi = isinstance(field, MultiSelectField)
    el.update(
        tag="multi_select_static" if multi else "select_static",
        placeholder=_text(i18n.t("choose_options" if multi else "choose_option"), 50),
        options=[
            {"text": _text(o.label, budget.option_text), "value": option_token(i)}
            for i, o in shown
        ],
    )
    if isinstance(field, MultiSelectField) and field.default:
        wanted = set(field.default)
        el["selected_values"] = [option_token(i) for i, o in shown if o.value in wanted]
    elif isinstance(field, SelectField) and field.default is not None:
        picked = [option_token(i) for i, o in shown if o.value == field.default]
        if picked:
            el["initial_option"] = picked[0]


def _button(card: RequestCard, index: int, action: AskHumanAction, budget: Budget) -> Element:
    button: Element = {
        "tag": "button",
        "text": _text(action.label, 60),
        "type": _BUTTON_TYPES[action.style],
        "name": f"b_{index}",
        "form_action_type": "submit",
        "behaviors": [{"type": "callback", "value": {"r": card.ref, "a": action.id}}],
    }
    if action.style == "destructive":
        button["confirm"] = {
            "title": _text(i18n.t("are_you_sure"), 50),
            "text": _text(i18n.t("this_will", action=action.label), budget.label + 20),
        }
    return button


def _withdraw_menu(card: RequestCard) -> Element:
    """The card's overflow menu: "Withdraw" (the run's starter and admins only; the
    engine refuses anyone else). Its callback value is ``{"r": ref, "w": 1}``."""
    return {
        "tag": "overflow",
        "width": "default",
        "options": [{"text": _text(i18n.t("withdraw"), 60), "value": WITHDRAW_TOKEN}],
        "behaviors": [{"type": "callback", "value": {"r": card.ref, "w": 1}}],
        "confirm": {
            "title": _text(i18n.t("withdraw_title"), 50),
            "text": _text(i18n.t("withdraw_confirm"), 300),
        },
    }


# ---------------------------------------------------------------- decided states


def decider_mention(card: RequestCard) -> str | None:
    """``<at id=ou_…></at>`` for the platform-verified Feishu decider, else None.

    Only a well-formed open_id of someone who decided *on Feishu* is ever mentioned:
    never ``all`` (a broadcast), never an email, a Slack id or anything with markup.
    """
    uid = card.decided_by_id
    if card.decided_by_platform not in (None, "feishu") or not uid or card.decided_via_id:
        return None
    return f"<at id={uid}></at>" if OPEN_ID.fullmatch(uid) else None


def _delegate_mention(card: RequestCard) -> str | None:
    """A delegate decided for someone: "<at Dave> for <at Bob>" (Feishu shows names)."""
    uid, via = card.decided_by_id, card.decided_via_id
    if card.decided_by_platform not in (None, "feishu") or not uid or not via:
        return None
    if not (OPEN_ID.fullmatch(uid) and OPEN_ID.fullmatch(via)):
        return None
    return f"<at id={via}></at> for <at id={uid}></at>"


def _decision_line(card: RequestCard) -> Element:
    """Who decided, what and when. A Feishu decider is an ``<at>`` mention of that one
    person (Feishu shows their name; identities carry no display name), which needs a
    markdown element; the untrusted rest of the line is escaped there."""
    mention = decider_mention(card) or _delegate_mention(card)
    if mention is None:
        return _div(decision_words(card), 1200)
    head, tail = decision_parts(card)
    content = feishu_escape(truncate(head, 300)) + i18n.t("by", who=mention)
    return {"tag": "markdown", "content": content + feishu_escape(truncate(tail, 900))}


def _decision_elements(card: RequestCard, budget: Budget) -> list[Element]:
    elements: list[Element] = [{"tag": "hr"}, _decision_line(card)]
    lines = [
        f"{truncate(label, budget.label)}: {truncate(value, 500)}"
        for label, value in value_lines(card)
    ]
    if lines:
        elements.append(_div("\n".join(lines), budget.body + 1000))
    return elements


# ---------------------------------------------------------------- reading callbacks


def parse_callback_value(value: object) -> tuple[str, str] | None:
    """``(ref, action id)`` from a button's callback value (object or JSON string)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, dict):
        return None
    ref, action = value.get("r"), value.get("a")
    if value.get("w") == 1 and "a" not in value:
        action = WITHDRAW_TOKEN  # the "Withdraw" menu item
        return (ref, action) if isinstance(ref, str) and 0 < len(ref) <= MAX_REF_CHARS else None
    if (isinstance(ref, str) and 0 < len(ref) <= MAX_REF_CHARS and isinstance(action, str)
            and len(action) <= MAX_ID_CHARS and is_identifier(action)):
        return ref, action
    return None


def read_values(
    form_value: Mapping[str, Any] | None, card_or_args: RequestCard | AskHumanToolArgs
) -> dict[str, JsonValue]:
    """``action.form_value`` → contract values; missing or empty inputs are omitted.

    File fields never appear here: Feishu has no upload component, so files arrive
    as thread replies and the adapter collects them.
    """
    args = args_of(card_or_args)
    values: dict[str, JsonValue] = {}
    for field in args.fields:
        raw = (form_value or {}).get(field_key(field))
        if raw is None:
            continue
        value = _read(field, raw)
        if value is not None:
            values[field.name] = value
    return values


def read_edits(form_value: Mapping[str, Any] | None, card: RequestCard) -> dict[str, JsonValue]:
    """The "Edit and approve" inputs of a tool card's form → ``{argument: typed}``."""
    if card.tool is None or not card.tool.editable:
        return {}
    fields = edit_fields(card.tool)
    values: dict[str, JsonValue] = {}
    for field in fields:
        raw = (form_value or {}).get(field_key(field))
        value = _read(field, raw) if raw is not None else None
        if value is not None:
            values[field.name] = value
    return named_edits(card.tool, values)


def _read(field: AskHumanField, raw: object) -> JsonValue:
    """One form entry → the contract's value type (None when empty)."""
    if isinstance(field, ParagraphField | NumberField):
        return raw if isinstance(raw, str) and raw.strip() else None
    if isinstance(field, SelectField):
        return option_value(field.options, raw)
    if isinstance(field, MultiSelectField):
        items = raw if isinstance(raw, list) else []
        chosen = [v for v in (option_value(field.options, t) for t in items) if v is not None]
        return list(chosen) or None
    if isinstance(field, CheckboxField):
        if isinstance(raw, bool):
            return raw
        return str(raw).strip().lower() == "true" if str(raw).strip() else None
    if isinstance(field, DateField):
        return _date(raw)
    return None


def _date(raw: object) -> str | None:
    """Feishu sends ``"2024-04-01 +0800"``; the contract wants ``2024-04-01``."""
    head = raw.strip().split(" ")[0] if isinstance(raw, str) else ""
    try:
        return dt.date.fromisoformat(head).isoformat() if head else None
    except ValueError:
        return None
