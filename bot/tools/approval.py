"""Tool approvals as data, and the one mapping from a human answer to pydantic-ai's.

``ToolApprovalRequest`` is what a run that stopped on an approval hands the engine
(one per call); ``ApprovalTicket`` is what the engine hands back on resume (the
stored hash and how long the request waited). ``approval_result`` turns the stored
``AskHumanToolResult`` into ``ToolApproved`` / ``ToolDenied``: only an explicit
Approve runs the tool, everything else (reject, timeout, cancel, unreachable, an
unknown action) is a denial with a message for the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bot.askhuman.schema import AskHumanToolResult

if TYPE_CHECKING:  # pydantic-ai is imported when a result is mapped, not with the config
    from pydantic_ai import ToolApproved, ToolDenied

APPROVE = "approve"
APPROVE_GRANT = "approve_grant"
"""Approve this call and grant similar ones for a while (a standing grant)."""
APPROVE_EDIT = "approve_edit"
"""Edit and approve: an approval whose arguments an approver changed first."""
APPROVE_FAMILY = frozenset({APPROVE, APPROVE_GRANT, APPROVE_EDIT})
"""Actions that approve the call: they run the tool and count together for a quorum."""
REJECT = "reject"
REASON_FIELD = "reason"
REJECTED = "The reviewer rejected this call; the action was not run."
UNREACHABLE = "Nobody could be reached to approve this call; the action was not run."


@dataclass(frozen=True)
class ToolApprovalRequest:
    """One tool call waiting for approval, as the runtime saw it."""

    tool_call_id: str
    tool: str
    description: str
    args: dict[str, Any]
    """The model's arguments after validation and conversion (display only)."""
    fixed: dict[str, Any]
    """The admin ``fixed`` values the call will get (shown, marked as fixed)."""
    binding: str
    """``bot.tools.binding.binding_hash`` of the call; the resume must match it."""
    route: str | None = None
    """Where the approval goes (None: the agent's route)."""
    grant_scope: str | None = None
    """The tool's ``grant_scope`` (CEL over ``args`` and ``call``): which later calls a
    standing grant made from this approval covers (None: the exact same arguments)."""
    editable: tuple[str, ...] = ()
    """Arguments an approver may change (admin ``editable``); empty: no "Edit and approve"."""
    schema: dict[str, Any] = field(default_factory=dict)
    """JSON Schema of the ``editable`` arguments (from the tool's own schema)."""
    call_args: dict[str, Any] | None = None
    """The call's arguments exactly as hashed in ``binding`` (kept when editable, so the
    engine can hash an edited call the way the runtime will)."""


@dataclass(frozen=True)
class ApprovalTicket:
    """What the engine stored when it asked: checked and used on resume."""

    binding: str
    waited_seconds: float = 0.0
    """From the request's creation to its resolution (for timeout/cancel messages)."""
    edited: dict[str, Any] | None = None
    """The arguments an approver changed (name → new value), if any: the call runs with
    them (``override_args``) after it was checked against ``binding``."""
    edit_note: str | None = None
    """What the model is told about the edit (added to the tool's return)."""


def format_wait(seconds: float) -> str:
    """``1800`` → ``30m``; ``5400`` → ``1h 30m``; ``42`` → ``42s``."""
    total = max(0, round(seconds))
    if total < 60:
        return f"{total}s"
    minutes = round(total / 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    parts = [f"{days}d" if days else "", f"{hours}h" if hours else "",
             f"{minutes}m" if minutes else ""]
    return " ".join(p for p in parts if p)


def approval_result(
    result: AskHumanToolResult, waited_seconds: float,
    override_args: dict[str, Any] | None = None,
) -> ToolApproved | ToolDenied:
    """approve (or approve_edit) → ``ToolApproved`` (with ``override_args`` when an
    approver edited the call); reject → ``ToolDenied(reason or default)``;
    timeout / cancel → ``ToolDenied("No approval within 30m; the action was not run.")``
    with the real wait. A timeout never runs the tool."""
    from pydantic_ai import ToolApproved, ToolDenied

    action = result.action.id if result.action else None
    if result.status == "submitted" and action in APPROVE_FAMILY:
        return ToolApproved(override_args=override_args)
    if result.status == "submitted" and action == REJECT:
        reason = result.values.get(REASON_FIELD)
        if isinstance(reason, str) and reason.strip():
            return ToolDenied(f"The reviewer rejected this call: {reason.strip()} "
                              "The action was not run.")
        return ToolDenied(REJECTED)
    if result.status in ("timeout", "cancelled"):
        text = f"No approval within {format_wait(waited_seconds)}; the action was not run."
        if result.status == "cancelled" and result.message:
            text += f" ({result.message})"
        return ToolDenied(text)
    if result.status == "unavailable":
        return ToolDenied(UNREACHABLE)
    return ToolDenied(REJECTED)
