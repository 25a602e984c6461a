"""Plain-text rendering for terminals and notification fallbacks.

The same words also feed Slack's fallback ``text`` and Feishu's chat-list
summary, so the helpers that turn a field, a value or a status into words live
here and the platform renderers only add their own escaping on top.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from pydantic import JsonValue

from bot.askhuman.schema import (
    AskHumanField,
    FileField,
    FileListField,
    MultiSelectField,
    NumberField,
    SelectField,
)
from renderers import i18n
from renderers.card import RequestCard, progress_text
from renderers.links import honest_source
from renderers.markdown import check_plain, plain, truncate
from renderers.tool_card import arg_lines, arg_text, edit_line
from renderers.words import platform_name

STATUS_WORDS = {
    "pending": "Waiting for a response",
    "submitted": "Answered",
    "timeout": "Timed out",
    "cancelled": "Cancelled",
    "unavailable": "Unavailable",
}
STYLE_WORDS = {"primary": " [primary]", "destructive": " [destructive]", "default": ""}


def format_when(moment: dt.datetime) -> str:
    """A deadline or decision time in the card's time zone (UTC unless the route sets
    one; ``renderers.i18n``); naive datetimes are taken as UTC."""
    return i18n.format_when(moment)


def field_hint(field: AskHumanField) -> str:
    """What kind of answer a field expects, in a few words (raw, unescaped)."""
    if isinstance(field, SelectField | MultiSelectField):
        kind = i18n.t("hint.options" if isinstance(field, SelectField) else "hint.any")
        return f"{kind}: " + " / ".join(o.label for o in field.options)
    if isinstance(field, NumberField):
        bounds = ([i18n.t("hint.min", value=field.min_value)]
                  if field.min_value is not None else [])
        bounds += ([i18n.t("hint.max", value=field.max_value)]
                   if field.max_value is not None else [])
        return i18n.t("hint.number") + (f" ({', '.join(bounds)})" if bounds else "")
    if isinstance(field, FileField | FileListField):
        most = field.max_files or (1 if isinstance(field, FileField) else None)
        return i18n.t("hint.file") + (" " + i18n.t("hint.up_to", count=most) if most else "")
    key = {"checkbox": "hint.checkbox", "date": "hint.date"}.get(field.type, "hint.text")
    return i18n.t(key)


def value_text(field: AskHumanField | None, value: JsonValue) -> str:
    """A submitted value as words: option labels, Yes/No, file names (raw, unescaped)."""
    if isinstance(value, bool):
        return i18n.t("yes") if value else i18n.t("no")
    if isinstance(field, SelectField | MultiSelectField):
        labels = {o.value: o.label for o in field.options}
        items = value if isinstance(value, list) else [value]
        return ", ".join(labels.get(str(v), str(v)) for v in items)
    if isinstance(value, list):
        return ", ".join(_item_text(v) for v in value) or "—"
    return "—" if value is None or value == "" else str(value)


def _item_text(item: JsonValue) -> str:
    if isinstance(item, dict):
        return str(item.get("name") or item.get("id") or "file")
    return str(item)


def value_lines(card: RequestCard) -> list[tuple[str, str]]:
    """``(label, value)`` pairs for the submitted values, in field order."""
    values: Mapping[str, JsonValue] = card.values
    names = [f.name for f in card.args.fields if f.name in values]
    names += [n for n in values if n not in names]
    fields = {f.name: f for f in card.args.fields}
    return [
        (fields[n].label if n in fields else n, value_text(fields.get(n), values[n]))
        for n in names
    ]


CHAT_PLATFORMS = ("slack", "feishu")
"""Platforms whose raw user ids mean nothing to people: their nameless deciders are
"someone on Slack"."""


def decider_words(card: RequestCard) -> str | None:
    """Who decided, as words: the display name, else "someone on Feishu" for a chat
    platform id (raw platform ids mean nothing to people), else the console/API name."""
    if card.decided_by_name:
        return card.decided_by_name
    if not card.decided_by_id:
        return None
    if card.decided_by_platform in CHAT_PLATFORMS:
        platform = platform_name(card.decided_by_platform).text(i18n.current_locale())
        return i18n.t("someone_on", platform=platform)
    return card.decided_by_id if card.decided_by_platform else None


def decision_parts(card: RequestCard) -> tuple[str, str]:
    """The decision line around its "— by X" part: ("Answered: Approve", " at … UTC")."""
    head = i18n.decision_word(card.status)
    if card.status == "submitted" and card.action_label:
        head += f": {card.action_label}"
    tail = i18n.t("at", when=format_when(card.decided_at)) if card.decided_at else ""
    if card.message and card.status != "submitted":
        tail += f". {card.message}"
    return head, tail


@i18n.localized
def decision_words(card: RequestCard, who: str | None = None) -> str:
    """E.g. "Answered: Approve — by Alice at 2024-05-01 10:00 UTC" (raw)."""
    head, tail = decision_parts(card)
    by = who if who is not None else decider_words(card)
    return head + (i18n.t("by", who=by) if by else "") + tail


@i18n.localized
def summary(card: RequestCard, limit: int = 200) -> str:
    """One short sanitized line for notifications and chat-list previews."""
    subject = card.args.title or card.args.question
    if card.status == "pending":
        lead = i18n.t("urgent_tag") if card.args.urgency == "high" else ""
        line = lead + i18n.t("asks", subject=subject, agent=card.agent_name)
    else:
        line = f"{i18n.status_word(card.status)}: {subject}"
    return plain(" ".join(line.split()), limit)


@i18n.localized
def reminder_text(card: RequestCard, number: int) -> str:
    """The reminder posted in a card's thread: trusted words only (no model text).

    The agent name comes from admin configuration and the deadline from the engine;
    it is still passed through ``plain`` so adapters can escape it like any text. The
    reminder's ``number`` keeps each reminder's text (and idempotency key) distinct.
    """
    due = i18n.t("due_paren", when=format_when(card.deadline)) if card.deadline else ""
    line = i18n.t("reminder", number=number, agent=card.agent_name, due=due)
    return plain(line, 300)


@i18n.localized
def render_text(card: RequestCard) -> str:
    """The whole request as readable, sanitized plain text."""
    lines = _head_lines(card)
    if card.status == "pending":
        lines += _field_lines(card) + _action_lines(card)
    else:
        lines += ["", decision_words(card)]
        lines += [f"  {label}: {value}" for label, value in value_lines(card)]
    out = plain("\n".join(lines).rstrip() + "\n")
    check_plain(out)
    return out


def _head_lines(card: RequestCard) -> list[str]:
    if card.tool is not None:
        return _tool_lines(card)
    args = card.args
    lines = [(i18n.t("urgent_text") if args.urgency == "high" else "")
             + (args.title or args.question)]
    if args.title:
        lines += ["", args.question]
    if args.markdown:
        body = honest_source(args.markdown.strip(), lambda host: i18n.t("links_to", host=host))
        lines += ["", truncate(body, 20000)]
    meta = i18n.t("from_colon", agent=card.agent_name)
    return [*lines, "", meta + meta_tail(card)]


def meta_tail(card: RequestCard) -> str:
    """" · Due: … · 1 of 2 approvals: … · Escalated to …" after a card's first meta item
    (the same on question and tool-approval cards)."""
    tail = ""
    if card.deadline:
        tail += " · " + i18n.t("due_colon", when=format_when(card.deadline))
    progress = progress_text(card, i18n.t) if card.status == "pending" else None
    if progress:
        tail += " · " + progress
    elif card.quorum > 1:
        tail += " · " + i18n.t("votes_colon", votes=card.votes, quorum=card.quorum)
    return tail + "".join(" · " + note for note in waiting_notes(card))


def waiting_notes(card: RequestCard) -> list[str]:
    """"Escalated to oncall, managers" and "Last reminded …" for an open card (raw text:
    route names are admin config, still escaped by each renderer)."""
    if card.status != "pending":
        return []
    notes = []
    if card.escalated_to:
        notes.append(i18n.t("escalated_to", routes=", ".join(card.escalated_to)))
    if card.reminded_at is not None:
        notes.append(i18n.t("reminded_at", when=format_when(card.reminded_at)))
    return notes


def _tool_lines(card: RequestCard) -> list[str]:
    """A tool-approval card: the call, one argument per line, fixed ones marked."""
    view = card.tool
    assert view is not None
    lines = [card.args.title or card.args.question, "",
             i18n.t("tool.wants_to_run", agent=card.agent_name, tool=view.tool)]
    if view.description:
        lines.append(truncate(view.description, 2000))
    lines += ["", i18n.t("tool.arguments")]
    lines += [f"  {arg_text(line)}" for line in arg_lines(view)] or [
        "  " + i18n.t("no_arguments")]
    edited = edit_line(view)
    if edited:
        lines.append("  ✎ " + edited)
    meta = (i18n.t("from_colon", agent=card.agent_name) + " · "
            + i18n.t("call_hash_colon", hash=view.short_binding))
    return [*lines, "", meta + meta_tail(card)]


def _field_lines(card: RequestCard) -> list[str]:
    if not card.args.fields:
        return []
    lines = ["", i18n.t("fields")]
    for i, field in enumerate(card.args.fields, 1):
        need = i18n.t("required") if field.required else ""
        default = getattr(field, "default", None)
        shown = (" " + i18n.t("default", value=value_text(field, default))
                 if default not in (None, "") else "")
        lines.append(f"  {i}. {field.label}{need} — {field_hint(field)}{shown}")
    return lines


def _action_lines(card: RequestCard) -> list[str]:
    lines = ["", i18n.t("actions")]
    for i, action in enumerate(card.args.actions, 1):
        style = i18n.t(f"style.{action.style}") if action.style != "default" else ""
        lines.append(f"  {i}. {action.label}{style}")
    return lines
