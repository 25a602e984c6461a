"""The tool-approval card: Approve / Reject a tool call, with an optional reason.

A tool approval travels through the same pipeline as an ask_human request: its
``args`` are made here, by us, never by the model (``tool_approval_args``: trusted
title and question, an optional paragraph ``reason`` field, Approve and Reject
buttons), so answering, quorum, timeouts, reminders and the audit all work as they
do for any request. ``RequestCard.tool`` (a ``ToolApprovalView``) adds the call
itself, which each renderer lists with ``arg_lines``: compact JSON for nested
values, long values collapsed, admin ``fixed`` values marked.

Public entry points for other doors (e.g. an HTTP API creating approvals):
``tool_approval_view`` (call → view), ``tool_approval_args`` (view → args), and
``tool_approval_card`` (both → a pending ``RequestCard`` any renderer accepts).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from pydantic import JsonValue

from bot.askhuman.schema import (
    AskHumanAction,
    AskHumanField,
    AskHumanToolArgs,
    ParagraphField,
    SelectField,
    SelectOption,
)
from renderers import i18n
from renderers.card import GrantOffer, RequestCard, ToolApprovalView, ToolArg, ToolEdit

APPROVE = "approve"
APPROVE_GRANT = "approve_grant"
"""Approve, and grant similar calls for a while (``bot.engine.grant_hook``)."""
APPROVE_EDIT = "approve_edit"
"""Edit and approve: offered when the tool has editable arguments (``renderers.tool_edits``)."""
REJECT = "reject"
REASON_FIELD = "reason"
GRANT_DURATION_FIELD = "grant_duration"
"""Seconds, as a string option value."""
GRANT_USES_FIELD = "grant_uses"
DURATION_PRESETS = (900, 3600, 4 * 3600, 8 * 3600, 86400, 7 * 86400)
USES_PRESETS = (1, 5, 10, 25, 50, 100)
DEFAULT_SECONDS = 3600
DEFAULT_USES = 10
VALUE_CHARS = 300
"""Longest argument value shown before it is collapsed."""
MAX_ARGS_SHOWN = 40
STORED_VALUE_CHARS = 4000
"""Longest value kept for display: the card shows at most ``VALUE_CHARS`` of it, and the
binding hash (not this copy) is what ties the approval to the real arguments."""
FIXED_MARK = "(fixed by admin)"
"""The English marker (``i18n.t("tool.fixed")`` in the card's locale)."""


@dataclass(frozen=True)
class ArgLine:
    """One readable argument: raw text for the renderer to escape its own way."""

    name: str
    text: str
    fixed: bool
    collapsed: bool


def tool_approval_view(
    tool: str, description: str, args: Mapping[str, Any], fixed: Mapping[str, Any],
    binding: str, *, editable: tuple[str, ...] = (), schema: Mapping[str, Any] | None = None,
) -> ToolApprovalView:
    """The model's arguments first, then the admin's ``fixed`` ones (marked)."""
    items = [_arg(str(k), v, False) for k, v in args.items() if k not in fixed]
    items += [_arg(str(k), v, True) for k, v in fixed.items()]
    return ToolApprovalView(tool=tool, description=description, args=tuple(items),
                            binding=binding, editable=editable,
                            schema=cast(Mapping[str, JsonValue], dict(schema or {})))


def view_to_json(view: ToolApprovalView) -> dict[str, JsonValue]:
    """What the engine stores in ``human_requests.tool`` (readers ignore unknown keys)."""
    stored: dict[str, JsonValue] = {
        "tool": view.tool,
        "description": view.description,
        "args": [{"name": a.name, "value": a.value, "fixed": a.fixed, "size": a.size}
                 for a in view.args],
        "binding": view.binding,
        "grant_scope": view.grant_scope,
    }
    if view.grant is not None:
        stored["grant_offer"] = {"max_seconds": view.grant.max_seconds,
                                 "max_uses": view.grant.max_uses}
    if view.editable:
        stored["editable"] = list(view.editable)
        stored["schema"] = dict(view.schema)
    if view.edit is not None:
        stored["edit"] = {"before": dict(view.edit.before), "after": dict(view.edit.after),
                          "by": view.edit.by}
    return stored


def view_from_json(data: Mapping[str, Any]) -> ToolApprovalView:
    args = tuple(ToolArg(str(a.get("name", "")), a.get("value"), bool(a.get("fixed")),
                         a["size"] if isinstance(a.get("size"), int) else None)
                 for a in data.get("args") or [] if isinstance(a, dict))
    offer = data.get("grant_offer")
    grant = None
    if isinstance(offer, dict):
        grant = GrantOffer(float(offer.get("max_seconds") or 0), int(offer.get("max_uses") or 0))
    scope = data.get("grant_scope")
    editable = data.get("editable")
    schema = data.get("schema")
    return ToolApprovalView(tool=str(data.get("tool", "")),
                            description=str(data.get("description") or ""), args=args,
                            binding=str(data.get("binding") or ""), grant=grant,
                            grant_scope=scope if isinstance(scope, str) else None,
                            editable=tuple(str(n) for n in editable)
                            if isinstance(editable, list) else (),
                            schema=schema if isinstance(schema, dict) else {},
                            edit=_edit_from_json(data.get("edit")))


def _edit_from_json(data: object) -> ToolEdit | None:
    if not isinstance(data, dict):
        return None
    before, after = data.get("before"), data.get("after")
    return ToolEdit(before if isinstance(before, dict) else {},
                    after if isinstance(after, dict) else {}, str(data.get("by") or ""))


def tool_approval_args(view: ToolApprovalView, agent: str) -> AskHumanToolArgs:
    """The engine-made request behind the card: Approve, "Approve and allow similar…"
    when the route allows grants (``view.grant``), "Edit and approve" when the tool
    has editable arguments, Reject, an optional reason and the
    grant's duration and uses selects, in the current locale (``i18n.speaking``; the
    engine stores it in ``en`` and ``bot.engine.cards.localized`` rebuilds it in the
    route's locale)."""
    tool = view.tool[:100]
    question = i18n.t("tool.question", agent=agent[:100], tool=tool)
    fields: list[AskHumanField] = [ParagraphField(
        name=REASON_FIELD, label=i18n.t("tool.reason"), placeholder=i18n.t("tool.reason_hint"))]
    actions = [AskHumanAction(id=APPROVE, label=i18n.t("tool.approve"), style="primary")]
    if view.grant is not None:
        similar = (i18n.t("tool.grant_scope", scope=view.grant_scope[:200])
                   if view.grant_scope else i18n.t("tool.grant_exact"))
        question += " " + i18n.t("tool.grant_question", tool=tool, agent=agent[:100],
                                 similar=similar)
        fields += grant_fields(view.grant)
        actions.append(AskHumanAction(id=APPROVE_GRANT, label=i18n.t("tool.grant")))
    if view.editable:
        actions.append(AskHumanAction(id=APPROVE_EDIT, label=i18n.t("tool.approve_edit")))
    actions.append(AskHumanAction(id=REJECT, label=i18n.t("tool.reject"), style="destructive"))
    return AskHumanToolArgs(title=i18n.t("tool.title", tool=tool), question=question,
                            fields=fields, actions=actions, urgency="normal")


def duration_choices(max_seconds: float) -> list[int]:
    """The duration presets up to ``max_seconds``, plus the maximum itself."""
    cap = int(max_seconds)
    chosen = [p for p in DURATION_PRESETS if p <= cap]
    return [*chosen, cap] if cap not in chosen and cap > 0 else chosen


def uses_choices(max_uses: int) -> list[int]:
    """The uses presets up to ``max_uses``, plus the maximum itself."""
    chosen = [p for p in USES_PRESETS if p <= max_uses]
    return [*chosen, max_uses] if max_uses not in chosen and max_uses > 0 else chosen


def _default(choices: list[int], preferred: int) -> int:
    below = [c for c in choices if c <= preferred]
    return below[-1] if below else choices[0]


def grant_fields(offer: GrantOffer) -> list[AskHumanField]:
    """The two optional selects of "Approve and allow similar…" (values are strings:
    seconds and uses; anything else is refused by the answer's value checks)."""
    durations, uses = duration_choices(offer.max_seconds), uses_choices(offer.max_uses)
    return [
        SelectField(name=GRANT_DURATION_FIELD, label=i18n.t("tool.grant_duration"),
                    options=[SelectOption(value=str(d), label=span_text(d)) for d in durations],
                    default=str(_default(durations, DEFAULT_SECONDS))),
        SelectField(name=GRANT_USES_FIELD, label=i18n.t("tool.grant_uses"),
                    options=[SelectOption(value=str(u), label=str(u)) for u in uses],
                    default=str(_default(uses, DEFAULT_USES))),
    ]


def span_text(seconds: float) -> str:
    """``900`` → ``15m``, ``3600`` → ``1h``, ``604800`` → ``7d`` (the largest exact unit)."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def edit_line(view: ToolApprovalView, value_chars: int = 100) -> str | None:
    """``replicas: 10 → 5, edited by Alice`` once the call was edited (raw text: each
    renderer escapes it its own way), else None."""
    edit = view.edit
    if edit is None:
        return None
    changes = [f"{name[:100]}: {_short(edit.before.get(name), value_chars)} → "
               f"{_short(value, value_chars)}" for name, value in edit.after.items()]
    return i18n.t("tool.edited", changes="; ".join(changes), who=edit.by[:100])


def _short(value: Any, chars: int) -> str:
    text = " ".join(_text(value).split())
    return text if len(text) <= chars else text[:chars] + "…"


def tool_approval_card(
    ref: str, view: ToolApprovalView, agent: str, deadline: dt.datetime | None = None,
    quorum: int = 1,
) -> RequestCard:
    """A pending tool-approval card, ready for ``render_request`` / ``render_card`` /
    ``render_text``."""
    return RequestCard(ref=ref, args=tool_approval_args(view, agent), agent_name=agent,
                       deadline=deadline, quorum=quorum, tool=view)


def arg_lines(view: ToolApprovalView, value_chars: int = VALUE_CHARS) -> list[ArgLine]:
    """The arguments as readable lines (raw text; each renderer escapes it)."""
    lines = []
    for arg in view.args[:MAX_ARGS_SHOWN]:
        text = _text(arg.value)
        text = " ".join(text.split()) if "\n" in text else text
        size = arg.size or len(text)
        collapsed = size > value_chars
        if collapsed:
            text = f"{text[:value_chars]}… " + i18n.t("tool.more_chars",
                                                       count=size - value_chars)
        lines.append(ArgLine(arg.name[:100], text, arg.fixed, collapsed))
    hidden = len(view.args) - MAX_ARGS_SHOWN
    if hidden > 0:
        lines.append(ArgLine("…", i18n.t("tool.more_args", count=hidden), False, True))
    return lines


def arg_text(line: ArgLine) -> str:
    """``name: value`` with the fixed marker, before platform escaping."""
    mark = " " + i18n.t("tool.fixed") if line.fixed else ""
    return f"{line.name}: {line.text}{mark}"


def _arg(name: str, value: Any, fixed: bool) -> ToolArg:
    """The value as shown later: as is, or (if huge) the start of its text and its size."""
    text = _text(value)
    if len(text) <= STORED_VALUE_CHARS:
        return ToolArg(name, cast(JsonValue, value), fixed)
    return ToolArg(name, text[:STORED_VALUE_CHARS], fixed, size=len(text))


def _text(value: JsonValue) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
