"""A tool-call approval from the API or MCP: its checks and what its answer means.

``approval_request`` checks an approval body against the same guardrails as an ask;
the engine then stores it with the tool-approval card that embedded agents' tool
calls get (``bot.engine.external``: tool name, description, sanitized arguments,
binding hash), so approvers see one kind of card whoever asks. ``approval_decision``
maps the answer to ``{approved, reason}``.
"""

from __future__ import annotations

import json
from typing import Any

from bot.askhuman.args import validate_and_normalize_args
from bot.askhuman.config import AskHumanConfig
from bot.askhuman.schema import AskHumanToolArgs

APPROVE = "approve"
APPROVE_EDIT = "approve_edit"
APPROVES = frozenset({APPROVE, "approve_grant", APPROVE_EDIT})
"""Answers that approve (``bot.tools.approval.APPROVE_FAMILY``)."""
REJECT = "reject"
REASON_FIELD = "reason"
MAX_VALUE_CHARS = 600
MAX_LISTING_CHARS = 6000
APPROVAL_CONFIG = AskHumanConfig()
"""Dify's default guardrails: what this module builds always fits them."""


def approval_request(tool_name: str, args: dict[str, Any], reason: str | None) -> AskHumanToolArgs:
    """The request people see: the tool, why (the agent's words), and its arguments."""
    question = f"An agent wants to run the tool '{_cut(tool_name, 120)}'. Approve or reject?"
    if reason:
        question += f"\n\nReason given: {_cut(reason, 600)}"
    raw = {
        "title": _cut(f"Approve {tool_name}?", 200),
        "question": question,
        "markdown": args_listing(args),
        "fields": [{"type": "paragraph", "name": REASON_FIELD, "label": "Note (optional)",
                    "placeholder": "Why you approve or reject"}],
        "actions": [{"id": APPROVE, "label": "Approve", "style": "primary"},
                    {"id": REJECT, "label": "Reject", "style": "destructive"}],
        "urgency": "high",
    }
    return validate_and_normalize_args(raw, APPROVAL_CONFIG)


def args_listing(args: dict[str, Any]) -> str:
    """``**name**`` and the value as JSON in a code block, one per argument (cut)."""
    if not args:
        return "_No arguments._"
    parts: list[str] = []
    used = 0
    for index, (name, value) in enumerate(args.items()):
        text = json.dumps(value, ensure_ascii=False, indent=1, default=str)
        block = f"**{_inline(str(name))}**\n{_fence(_cut(text, MAX_VALUE_CHARS))}"
        if used + len(block) > MAX_LISTING_CHARS:
            parts.append(f"_…and {len(args) - index} more argument(s) not shown._")
            break
        parts.append(block)
        used += len(block)
    return "\n\n".join(parts)


def approval_decision(status: str, result: dict[str, Any] | None) -> dict[str, Any] | None:
    """``{approved, reason}`` once decided (None while pending)."""
    if status == "pending" or result is None:
        return None
    values = result.get("values") or {}
    note = values.get(REASON_FIELD) if isinstance(values, dict) else None
    note = note.strip() if isinstance(note, str) and note.strip() else None
    if status == "submitted":
        approved = (result.get("action") or {}).get("id") in APPROVES
        return {"approved": approved, "reason": note or ("Approved." if approved else "Rejected.")}
    message = result.get("message") or {
        "timeout": "Nobody decided before the deadline.",
        "cancelled": "The request was cancelled.",
        "unavailable": "Nobody could be reached.",
    }.get(status, status)
    return {"approved": False, "reason": str(message)}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _inline(name: str) -> str:
    return _cut("".join(c for c in name if c.isprintable() and c not in "*_`[]<>\\"), 64) or "?"


def _fence(text: str) -> str:
    """A code fence longer than any backtick run inside ``text`` (no break-out)."""
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}json\n{text}\n{fence}"
