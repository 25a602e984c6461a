"""RequestCard → Feishu/Lark Card JSON 2.0, and card callbacks → contract values.

Untrusted text goes into ``plain_text`` elements wherever formatting adds
nothing, because ``lark_md``/``markdown`` parse ``<at id=all>``; only the Markdown
body uses a ``markdown`` element, fully escaped by ``renderers.markdown``.

Identifier scheme (only this module knows it): form field names are
``f_{field name}``, buttons ``b_{index}``, option values ``o{index}``, and each
submit button's callback value is ``{"r": ref, "a": action id}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

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
)
from renderers import i18n
from renderers.budget import Budget, ladder
from renderers.card import (
    WITHDRAW_TOKEN,
    RequestCard,
    option_token,
    progress_text,
)
from renderers.feishu_values import field_key
from renderers.markdown import (
    FEISHU,
    check_feishu,
    chunks_reach,
    feishu_escape,
    json_bytes,
    markdown_chunks,
    plain,
    plain_each,
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
from renderers.tool_edits import edit_fields

Element = dict[str, Any]

MAX_ELEMENTS = 200
MAX_BYTES = 25_000
"""Feishu rejects cards over 30 KB and style tags grow the stored size; keep margin."""
MARKDOWN_CHUNK = 4000
INPUT_MAX_LENGTH = 1000
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


_SELECT_TAGS = frozenset({"select_static", "multi_select_static"})
_Select = SelectField | MultiSelectField
_OPTION_JSON = len(json.dumps({"text": {"tag": "plain_text", "content": ""}, "value": ""}))
"""An option object's bytes besides its label's and its token's characters."""
_INITIAL_JSON = len(json.dumps({"a": 0, "initial_option": ""})) - len(json.dumps({"a": 0}))
_MARKDOWN_JSON = len(json.dumps({"tag": "markdown", "content": ""})) - 2
_OPTION_BYTES = _OPTION_JSON + 2
"""Bytes each select option adds to the card besides its label, or more: its object
and a token of at least two characters (``o0``); a floor for ``ladder``."""

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


# ---------------------------------------------------------------- public rendering


@i18n.localized
def render_card(card: RequestCard) -> dict[str, Any]:
    """The Card JSON 2.0 for any status, shrunk step by step until within limits."""
    for budget in ladder(_LADDER, card.args, MAX_BYTES, per_option=_OPTION_BYTES,
                         options_shown=card.status == "pending"):
        fitted = _fitted(card, budget, last=budget is _LADDER[-1])
        if fitted is not None:
            result = fitted[0]
            break
    mention = (decider_mention(card) or _delegate_mention(card)) if card.status != "pending" \
        else None
    check_feishu(result, allowed_mentions=(mention,) if mention else ())
    return result


def _fitted(card: RequestCard, budget: Budget, last: bool) -> tuple[dict[str, Any], int] | None:
    """The card at ``budget`` and its size, if it fits Feishu's limits (the last step's
    in any case).

    The bulk goes in last: the card is built and measured without its select options
    and its Markdown body, the options are counted from their text, and a step the body
    would tip over the limit is refused from just enough of the body to know
    (``chunks_reach``), before any option object is built or the body walked as far
    as the step shows. A maximum card's first step built is such a step. The size is
    exact (``tests/renderers/test_ladder.py``): one ``json.dumps`` of the small card,
    then what each option, preselection and body chunk adds to its JSON."""
    result = _card(card, replace(budget, options=0), body=False)
    selects = [(el, f, _option_texts(f, budget)) for el, f in _selects(result, card)]
    size = card_size(result) + sum(_options_bytes(f, texts) for _, f, texts in selects)
    source = card.args.markdown if card.tool is None else None
    if not last and _over(size, source, budget):
        return None
    for el, field, texts in selects:
        _fill_options(el, field, texts)
    if source:
        chunks = markdown_chunks(source, FEISHU, MARKDOWN_CHUNK, budget.body)
        at = int(_shows_question(card.args))  # the body follows the question
        result["body"]["elements"][at:at] = [{"tag": "markdown", "content": c} for c in chunks]
        size += sum(_MARKDOWN_JSON + json_bytes(c) + 2 for c in chunks)  # + ", "
    if last or (size <= MAX_BYTES and count_elements(result) <= MAX_ELEMENTS):
        return result, size
    return None


def _over(size: int, body: str | None, budget: Budget) -> bool:
    """Whether a card of ``size`` bytes before its Markdown ``body`` is over the limit,
    or sure to be once the body is in."""
    if size > MAX_BYTES or not body:
        return size > MAX_BYTES
    return chunks_reach(body, FEISHU, MARKDOWN_CHUNK, budget.body, MAX_BYTES - size + 1)


_SIZE_ENCODER = json.JSONEncoder(ensure_ascii=False, check_circular=False)
"""``json.dumps``' output, a fifth faster: a card is a tree this module just built."""


def card_size(card: Mapping[str, Any]) -> int:
    """Bytes as Feishu measures them (UTF-8, no ASCII escaping)."""
    return len(_SIZE_ENCODER.encode(card).encode())


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


def _card(card: RequestCard, budget: Budget, body: bool = True) -> dict[str, Any]:
    """The card at ``budget``; without its Markdown body when ``body`` is False."""
    elements = _head_elements(card, budget, body)
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


def _shows_question(args: AskHumanToolArgs) -> bool:
    """Whether the body shows the question (else the header's title is the question)."""
    return bool(args.title) or len(args.question) > 150


def _head_elements(card: RequestCard, budget: Budget, body: bool = True) -> list[Element]:
    if card.tool is not None:
        return _tool_elements(card, budget)
    args = card.args
    elements: list[Element] = []
    if _shows_question(args):
        elements.append(_div(args.question, budget.question))
    if args.markdown and body:
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
    for field in _form_fields(card):
        elements += _field_elements(field, budget)
    columns = [
        {"tag": "column", "width": "auto", "elements": [_button(card, i, a, budget)]}
        for i, a in enumerate(card.args.actions)
    ]
    elements.append({"tag": "column_set", "flex_mode": "flow", "columns": columns})
    return {"tag": "form", "name": FORM_NAME, "elements": elements}


def _form_fields(card: RequestCard) -> list[AskHumanField]:
    """The form's inputs in order: a tool card's "Edit and approve" arguments (sent with
    the approval, prefilled), then the request's fields."""
    edits = card.tool is not None and card.tool.editable and card.status == "pending"
    return [*(edit_fields(card.tool) if edits and card.tool else ()), *card.args.fields]


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
    elif isinstance(field, _Select):
        _select(el, field, budget)
    elif isinstance(field, DateField):
        el.update(tag="date_picker", placeholder=_text(i18n.t("pick_date"), 50))
        if field.default:
            el["initial_date"] = field.default
    return {"tag": el.pop("tag"), **el}


def _select(el: Element, field: _Select, budget: Budget) -> None:
    multi = isinstance(field, MultiSelectField)
    el.update(
        tag="multi_select_static" if multi else "select_static",
        placeholder=_text(i18n.t("choose_options" if multi else "choose_option"), 50),
        options=[],
    )
    _fill_options(el, field, _option_texts(field, budget))


def _option_texts(field: _Select, budget: Budget) -> list[str]:
    """The labels of the options a select shows at ``budget`` (its first ones)."""
    texts = plain_each((o.label for o in field.options[: budget.options]), budget.option_text)
    return [t or "…" for t in texts]


def _fill_options(el: Element, field: _Select, texts: list[str]) -> None:
    """A select's options (``texts``, the first ones) and which of them are preselected."""
    el["options"] = [{"text": {"tag": "plain_text", "content": t}, "value": option_token(i)}
                     for i, t in enumerate(texts)]
    chosen = _preselected(field, len(texts))
    if isinstance(field, MultiSelectField) and field.default:
        el["selected_values"] = chosen
    elif chosen:
        el["initial_option"] = chosen[0]


def _preselected(field: _Select, shown: int) -> list[str]:
    """The tokens of the field's defaults among its first ``shown`` options."""
    if not field.default:
        return []
    wanted = set(field.default) if isinstance(field, MultiSelectField) else {field.default}
    return [option_token(i) for i, o in enumerate(field.options[:shown]) if o.value in wanted]


def _options_bytes(field: _Select, texts: list[str]) -> int:
    """What filling a select built with no options adds to the card's JSON: an option
    object per text, ", " between them, and the tokens it preselects."""
    if not texts:
        return 0
    count = len(texts)
    labels = json_bytes("".join(texts)) - 2 + 2 * count  # JSON escapes go char by char
    tokens = sum(len(option_token(i)) for i in range(count))
    size = count * (_OPTION_JSON - 2) + tokens + labels + 2 * (count - 1)
    chosen = _preselected(field, len(texts))
    if isinstance(field, MultiSelectField) and field.default:  # into its "selected_values": []
        return size + sum(len(t) + 2 for t in chosen) + 2 * max(len(chosen) - 1, 0)
    return size + (_INITIAL_JSON + len(chosen[0]) if chosen else 0)


def _selects(result: dict[str, Any], card: RequestCard) -> list[tuple[Element, _Select]]:
    """The card's select components, each with its field (the form lists them in order)."""
    form = next((el for el in result["body"]["elements"] if el.get("tag") == "form"), None)
    if form is None:
        return []
    fields = [f for f in _form_fields(card) if isinstance(f, _Select)]
    components = [el for el in form["elements"] if el.get("tag") in _SELECT_TAGS]
    assert len(components) == len(fields), "a select component per select field"
    return list(zip(components, fields, strict=True))


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
