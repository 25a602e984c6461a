"""RequestCard → the Slack Block Kit message: question, inputs, buttons, decided state.

Every status renders with the same entry point, shrunk along a budget ladder until it
fits Slack's limits. The identifiers the blocks carry are ``renderers.slack.ids``'s
to make and parse.
"""

from __future__ import annotations

import re
from typing import Any

from bot.askhuman.schema import (
    AskHumanAction,
    AskHumanField,
    CheckboxField,
    DateField,
    FileField,
    FileListField,
    MultiSelectField,
    NumberField,
    ParagraphField,
    SelectField,
    SelectOption,
)
from renderers import i18n
from renderers.budget import Budget, ladder
from renderers.card import WITHDRAW_TOKEN, RequestCard, option_token, progress_text
from renderers.markdown import (
    SLACK,
    check_slack,
    fit_chunks,
    markdown_chunks,
    slack_escape,
    split_units,
    truncate,
)
from renderers.slack.edit_modal import edit_action_id
from renderers.slack.ids import (
    INPUT_ACTION_ID,
    action_id_for,
    block_id,
    file_action_id,
    withdraw_action_id,
)
from renderers.slack.kit import SECTION_CHARS, Block, mrkdwn, plain_text, section
from renderers.text import (
    decider_words,
    field_hint,
    format_when,
    summary,
    value_lines,
    waiting_notes,
)
from renderers.tool_card import APPROVE_EDIT, arg_lines, edit_line

MAX_BLOCKS = 50
TOTAL_TEXT_CHARS = 11000
"""Slack rejects messages whose blocks hold ~13.2k chars (msg_blocks_too_long); keep margin."""
_USER_ID = re.compile(r"^[UW][A-Z0-9]+$")
_STYLES = {"primary": "primary", "destructive": "danger"}
_URGENCY = {"normal": "{text}", "high": ":rotating_light: *{text}*"}
"""Slack formatting around ``renderers.i18n``'s ``urgency.*`` words."""
_DECIDED_ICON = {
    "submitted": ":white_check_mark:",
    "timeout": ":alarm_clock:",
    "cancelled": ":no_entry_sign:",
    "unavailable": ":warning:",
}


_LADDER = (
    Budget(3000, 9000, 200, 100, 75, 3000),
    Budget(3000, 6000, 150, 100, 75, 1000),
    Budget(2000, 3000, 100, 50, 50, 500),
    Budget(1000, 1500, 75, 20, 40, 300),
    Budget(500, 500, 50, 10, 30, 200),
    Budget(300, 300, 40, 5, 20, 100),
)


# ---------------------------------------------------------------- public rendering


@i18n.localized
def render_request(card: RequestCard) -> dict[str, Any]:
    """``{"text", "blocks"}`` for any status, shrunk step by step until within limits."""
    for budget in ladder(_LADDER, card.args, TOTAL_TEXT_CHARS,
                         options_shown=card.status == "pending"):
        blocks = _blocks(card, budget)
        if len(blocks) <= MAX_BLOCKS and total_text_chars(blocks) <= TOTAL_TEXT_CHARS:
            break
    payload = {"text": slack_escape(summary(card)), "blocks": blocks[:MAX_BLOCKS]}
    check_slack(payload, allowed_mentions=_trusted_mentions(card))
    return payload


def total_text_chars(obj: object) -> int:
    """Characters Slack counts towards msg_blocks_too_long (text, prefills).

    Iterative, without a generator per level: it runs on every ladder step of every
    render, over a few thousand objects on a big card."""
    total, stack = 0, [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if isinstance(value, str):
                    if key == "text" or key == "initial_value":
                        total += len(value)
                elif isinstance(value, dict | list):
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return total


def _blocks(card: RequestCard, budget: Budget) -> list[Block]:
    blocks = _head_blocks(card, budget)
    if card.status == "pending":
        blocks += [_field_block(card, f, budget) for f in card.args.fields]
        blocks.append(_actions_block(card, budget))
    else:
        blocks.append({"type": "divider"})
        blocks += _decision_blocks(card, budget)
    return blocks


def _head_blocks(card: RequestCard, budget: Budget) -> list[Block]:
    if card.tool is not None:
        return _tool_head_blocks(card, budget)
    args = card.args
    blocks: list[Block] = [{"type": "header", "text": plain_text(args.title or args.question, 150)}]
    if args.title or len(args.question) > 150:
        question = truncate(slack_escape(args.question), min(budget.question, SECTION_CHARS))
        blocks.append(section(question))
    if args.markdown:
        chunks = markdown_chunks(args.markdown, SLACK, SECTION_CHARS, budget.body)
        blocks += [section(c) for c in chunks]
    blocks.append({"type": "context", "elements": [mrkdwn(_context_text(card))]})
    return blocks


def _context_text(card: RequestCard) -> str:
    urgency = card.args.urgency
    parts = [_URGENCY[urgency].format(text=i18n.t(f"urgency.{urgency}")),
             i18n.t("from", agent=f"*{slack_escape(card.agent_name)}*")]
    if card.deadline:
        parts.append(i18n.t("due", when=format_when(card.deadline)))
    progress = progress_text(card, i18n.t) if card.status == "pending" else None
    if progress:
        parts.append(slack_escape(progress))
    elif card.quorum > 1:
        parts.append(i18n.t("votes", votes=card.votes, quorum=card.quorum))
    if card.tool is not None:
        parts.append(i18n.t("call_hash", hash=slack_escape(card.tool.short_binding)))
    parts += [slack_escape(note) for note in waiting_notes(card)]
    return truncate("  ·  ".join(parts), 2000)


def _tool_head_blocks(card: RequestCard, budget: Budget) -> list[Block]:
    """A tool call to approve: who asks, the tool, and its arguments as a plain list.

    Every name and value is escaped mrkdwn in a ``verbatim`` section, so a value like
    ``<!channel>`` or ``<javascript:…|click>`` stays literal text.
    """
    view = card.tool
    assert view is not None
    intro = i18n.t("tool.wants_to_run", agent=f"*{slack_escape(truncate(card.agent_name, 100))}*",
                   tool=f"*{slack_escape(truncate(view.tool, 100))}*")
    if view.description:
        intro += "\n" + slack_escape(truncate(view.description, min(budget.question, 1000)))
    units = [
        f"• *{slack_escape(line.name)}*: {slack_escape(line.text)}"
        + (f" _{i18n.t('tool.fixed')}_" if line.fixed else "")
        for line in arg_lines(view, max(40, min(300, budget.default)))
    ] or [f"_{i18n.t('no_arguments')}_"]
    edited = edit_line(view)
    if edited:
        units.append(f"✎ _{slack_escape(edited)}_")
    chunks = fit_chunks(split_units(units, SECTION_CHARS), budget.body)
    return [
        {"type": "header", "text": plain_text(card.args.title or card.args.question, 150)},
        section(intro),
        *[section(c) for c in chunks],
        {"type": "context", "elements": [mrkdwn(_context_text(card))]},
    ]


# ---------------------------------------------------------------- inputs


def _field_block(card: RequestCard, field: AskHumanField, budget: Budget) -> Block:
    if isinstance(field, FileField | FileListField):
        return _file_button_block(card, field, budget)
    block: Block = {
        "type": "input",
        "block_id": block_id(card.version, card.args, field),
        "label": plain_text(field.label, budget.label),
        "optional": not field.required,
        "element": _element(field, budget),
    }
    hint = _options_hint(field, budget)
    if hint:
        block["hint"] = plain_text(hint, 2000)
    return block


def _element(field: AskHumanField, budget: Budget) -> dict[str, Any]:
    """The input element for one non-file field, defaults prefilled."""
    el: dict[str, Any] = {"action_id": INPUT_ACTION_ID}
    if isinstance(field, ParagraphField | NumberField):
        el.update(type="plain_text_input", multiline=isinstance(field, ParagraphField))
        hint = field.placeholder or (field_hint(field) if isinstance(field, NumberField) else "")
        if hint:
            el["placeholder"] = plain_text(hint, min(budget.label, 150))
        if field.default is not None and str(field.default) != "":
            el["initial_value"] = truncate(str(field.default), budget.default)
    elif isinstance(field, SelectField | MultiSelectField):
        _select(el, field, budget)
    elif isinstance(field, CheckboxField):
        box = {"text": plain_text(i18n.t("yes"), 75), "value": "true"}
        el.update(type="checkboxes", options=[box])
        if field.default:
            el["initial_options"] = [box]
    elif isinstance(field, DateField):
        el.update(type="datepicker", placeholder=plain_text(i18n.t("pick_date"), 150))
        if field.default:
            el["initial_date"] = field.default
    return el


def _select(el: dict[str, Any], field: SelectField | MultiSelectField, budget: Budget) -> None:
    shown = field.options[: budget.options]
    options = [_option(i, o, budget) for i, o in enumerate(shown)]
    multi = isinstance(field, MultiSelectField)
    el.update(
        type="multi_static_select" if multi else "static_select",
        options=options,
        placeholder=plain_text(i18n.t("choose_options" if multi else "choose_option"), 150),
    )
    wanted = (field.default or []) if isinstance(field, MultiSelectField) else [field.default]
    initial = [options[i] for i, o in enumerate(shown) if o.value in wanted]
    if initial and multi:
        el["initial_options"] = initial
    elif initial:
        el["initial_option"] = initial[0]


def _option(index: int, option: SelectOption, budget: Budget) -> dict[str, Any]:
    return {"text": plain_text(option.label, budget.option_text), "value": option_token(index)}


def _options_hint(field: AskHumanField, budget: Budget) -> str | None:
    if isinstance(field, SelectField | MultiSelectField) and len(field.options) > budget.options:
        return i18n.t("options_shown", shown=budget.options, total=len(field.options))
    return None


def _file_button_block(
    card: RequestCard, field: FileField | FileListField, budget: Budget
) -> Block:
    need = i18n.t("required") if field.required else ""
    text = f"*{slack_escape(truncate(field.label, budget.label))}*{need}\n{field_hint(field)}"
    button = {
        "type": "button",
        "text": plain_text(i18n.t("attach_files_button"), 75),
        "action_id": file_action_id(card.ref, card.args, field),
        "value": file_action_id(card.ref, card.args, field),
    }
    return {"type": "section", "text": mrkdwn(text), "accessory": button}


def _actions_block(card: RequestCard, budget: Budget) -> Block:
    buttons = []
    for action in card.args.actions:
        aid = action_id_for(card.ref, card.args, action)
        if action.id == APPROVE_EDIT and card.tool is not None and card.tool.editable:
            aid = edit_action_id(card.ref)  # opens the edit modal (its own listener)
        button: dict[str, Any] = {
            "type": "button",
            "text": plain_text(action.label, 75),
            "action_id": aid,
            "value": aid,
        }
        if action.style in _STYLES:
            button["style"] = _STYLES[action.style]
        if action.style == "destructive":
            button["confirm"] = _confirm(action, budget)
        buttons.append(button)
    buttons.append(_withdraw_menu(card))
    return {"type": "actions", "block_id": f"v{card.version}:actions", "elements": buttons}


def _withdraw_menu(card: RequestCard) -> dict[str, Any]:
    """The card's overflow menu: "Withdraw" (the run's starter and admins only; the
    engine refuses anyone else). Its ``action_id`` is ``ahw:{ref}``."""
    return {
        "type": "overflow",
        "action_id": withdraw_action_id(card.ref),
        "options": [{"text": plain_text(i18n.t("withdraw"), 75), "value": WITHDRAW_TOKEN}],
        "confirm": {
            "title": plain_text(i18n.t("withdraw_title"), 100),
            "text": plain_text(i18n.t("withdraw_confirm"), 300),
            "confirm": plain_text(i18n.t("withdraw"), 30),
            "deny": plain_text(i18n.t("cancel"), 30),
            "style": "danger",
        },
    }


def _confirm(action: AskHumanAction, budget: Budget) -> dict[str, Any]:
    """Destructive buttons ask once more; Slack shows a native dialog before sending."""
    return {
        "title": plain_text(i18n.t("are_you_sure"), 100),
        "text": plain_text(i18n.t("this_will", action=action.label), min(300, budget.label + 20)),
        "confirm": plain_text(action.label, 30),
        "deny": plain_text(i18n.t("cancel"), 30),
        "style": "danger",
    }


# ---------------------------------------------------------------- decided states


def _trusted_mentions(card: RequestCard) -> tuple[str, ...]:
    """The one mention we may emit: the platform-verified decider's own user id."""
    uid = card.decided_by_id
    if card.decided_by_platform not in (None, "slack") or card.decided_via_id:
        return ()
    return (f"<@{uid}>",) if uid and _USER_ID.fullmatch(uid) else ()


def _decision_blocks(card: RequestCard, budget: Budget) -> list[Block]:
    words = i18n.decision_word(card.status)
    if card.status == "submitted" and card.action_label:
        words += f": {truncate(card.action_label, 120)}"
    line = f"{_DECIDED_ICON[card.status]} *{slack_escape(words)}*"
    mentions = _trusted_mentions(card)
    if mentions:
        line += i18n.t("by_short", who=mentions[0])
    elif by := decider_words(card):
        line += i18n.t("by_short", who=slack_escape(truncate(by, 100)))
    if card.decided_at:
        line += i18n.t("at", when=format_when(card.decided_at))
    if card.message and card.status != "submitted":
        line += "\n" + slack_escape(truncate(card.message, 1000))
    units = [line] + [
        f"*{slack_escape(truncate(label, budget.label))}*: {slack_escape(truncate(value, 1000))}"
        for label, value in value_lines(card)
    ]
    chunks = fit_chunks(split_units(units, SECTION_CHARS), budget.body + 1000)
    return [section(c) for c in chunks]
