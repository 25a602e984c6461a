"""How a LangChain human-in-the-loop interrupt becomes askhuman cards, and each card's
answer one of the decisions the interrupt allows.

Kept apart from the I/O in ``askhuman_client.langgraph`` and free of LangGraph imports:
the rules (which card, which decision, what is refused) are the part worth reading and
testing on their own, and the sync and async helpers share them.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from askhuman_client.models import HumanRequest
from askhuman_client.verdicts import verdict_of

Decision = dict[str, Any]

TOOL_APPROVAL = "tool_approval"  # the value's "type" in HumanInTheLoopMiddleware's per_call mode
ANSWER_FIELD = "response"
ANSWER_ACTION = "respond"
REJECT_ACTION = "reject"
MAX_REASON_CHARS = 2000  # POST /approvals refuses a longer reason
MAX_QUESTION_CHARS = 1000  # Dify's default cap on an ask_human question


class DecisionNotAllowed(ValueError):
    """The person's answer maps to a decision the tool's review config does not allow
    (e.g. Reject, or a timeout, for a tool that allows only approve and edit).

    Nothing is resumed: LangGraph would refuse the decision anyway, and inventing an
    allowed one would misstate what the person said. ``request`` is their answer.
    """

    def __init__(self, review: Review, wanted: str, request: HumanRequest) -> None:
        self.review, self.wanted, self.request = review, wanted, request
        super().__init__(
            f"askhuman request {request.ref} ({request.status}) answers {review.name!r} with "
            f"{wanted!r}, but its review config allows only {', '.join(review.allowed)}; "
            "the interrupt was left unanswered")


@dataclass(frozen=True)
class Review:
    """One tool call awaiting review, with the decisions its config allows and the
    idempotency key that makes re-asking the same interrupt return the same card."""

    name: str
    args: dict[str, Any]
    description: str
    allowed: tuple[str, ...]
    key: str | None = None
    input_schema: dict[str, Any] | None = None

    def by_answer(self, answer_tools: Collection[str]) -> bool:
        """A typed-answer card (→ ``respond``) instead of an approval card: for tools
        whose result IS the person's answer (ask-user tools). A reviewer of
        ``send_email`` wants Approve / Edit / Reject even though ``interrupt_on=True``
        also allows respond, so respond is used only when asked for or when the
        config leaves nothing to approve."""
        if "respond" not in self.allowed:
            return False
        return self.name in answer_tools or not {"approve", "edit"} & set(self.allowed)


def is_hitl(value: Any) -> bool:
    """Whether an interrupt value comes from ``HumanInTheLoopMiddleware`` (either mode)."""
    if not isinstance(value, Mapping):
        return False
    return ("action_requests" in value and "review_configs" in value) or \
        value.get("type") == TOOL_APPROVAL


def is_batched(value: Mapping[str, Any]) -> bool:
    """Batched values are answered ``{"decisions": [...]}``, per-call ones by one decision."""
    return value.get("type") != TOOL_APPROVAL


def reviews_of(value: Mapping[str, Any], response_schema: Any, interrupt_id: str | None
               ) -> list[Review]:
    """The tool calls of one HITL interrupt value, in the order their decisions go back."""
    if not is_batched(value):
        if not isinstance(response_schema, Mapping):
            raise ValueError("a per_call tool_approval interrupt lists its allowed decisions "
                             "only in Interrupt.response_schema: pass the Interrupt, not its "
                             "value")
        return [Review(value["name"], dict(value.get("args") or {}),
                       str(value.get("description") or ""), allowed_in(response_schema),
                       key_for(interrupt_id, 0), _edit_schema(response_schema, value["name"]))]
    configs = {c["action_name"]: tuple(c["allowed_decisions"]) for c in value["review_configs"]}
    return [Review(a["name"], dict(a.get("args") or {}), str(a.get("description") or ""),
                   configs[a["name"]], key_for(interrupt_id, index))
            for index, a in enumerate(value["action_requests"])]


def key_for(interrupt_id: str | None, index: int) -> str | None:
    return None if interrupt_id is None else f"langgraph-{interrupt_id}-{index}"


def allowed_in(response_schema: Mapping[str, Any]) -> tuple[str, ...]:
    """The decision types a per-call ``response_schema`` (JSON Schema) accepts: the
    discriminator's mapping, or the single decision's ``type`` constant."""
    mapping = (response_schema.get("discriminator") or {}).get("mapping")
    if mapping:
        return tuple(mapping)
    const = ((response_schema.get("properties") or {}).get("type") or {}).get("const")
    if not const:
        raise ValueError("the interrupt's response_schema names no decision type")
    return (const,)


def _edit_schema(response_schema: Mapping[str, Any], tool: str) -> dict[str, Any] | None:
    """The tool's argument schema from a per-call ``response_schema``, so the edit modal
    types its inputs; only when self-contained (a ``$ref`` would not resolve alone)."""
    schema = (response_schema.get("$defs") or {}).get(tool)
    if not isinstance(schema, dict) or '"$ref"' in json.dumps(schema):
        return None
    return schema


def approval_fields(review: Review) -> dict[str, Any]:
    """Keyword arguments of ``request_approval`` beyond the route: the call, the
    description as the reason, and every argument editable only if edit is allowed."""
    editable = sorted(review.args) if "edit" in review.allowed else None
    return {"tool_name": review.name, "args": review.args,
            "reason": review.description[:MAX_REASON_CHARS] or None,
            "editable": editable or None, "idempotency_key": review.key,
            "input_schema": review.input_schema if editable else None}


def answer_args(review: Review) -> dict[str, Any]:
    """Dify ask_human args for a typed answer: one paragraph, Send, and Reject if allowed."""
    actions = [{"id": ANSWER_ACTION, "label": "Send answer", "style": "primary"}]
    if "reject" in review.allowed:
        actions.append({"id": REJECT_ACTION, "label": "Reject", "style": "destructive"})
    question = review.description or f"{review.name} needs your answer"
    return {"title": review.name, "question": question[:MAX_QUESTION_CHARS],
            "fields": [{"name": ANSWER_FIELD, "label": "Your answer", "type": "paragraph"}],
            "actions": actions}


def decision_of(review: Review, request: HumanRequest) -> Decision:
    """The resolved request as one decision the review allows, or ``DecisionNotAllowed``."""
    if request.kind == "approval":
        return _from_approval(review, request)
    return _from_answer(review, request)


def _from_approval(review: Review, request: HumanRequest) -> Decision:
    verdict = verdict_of(request, review.args)
    if not verdict.approved:
        return _reject(review, request, verdict.message)
    edit = {"edited_action": {"name": review.name, "args": verdict.args}}
    if verdict.edited:  # only possible when edit is allowed: editable is empty otherwise
        return _allowed(review, "edit", request) | edit
    if "approve" in review.allowed or "edit" not in review.allowed:
        return _allowed(review, "approve", request)
    return {"type": "edit"} | edit  # an edit-only tool: the edit that changes nothing


def _from_answer(review: Review, request: HumanRequest) -> Decision:
    result = request.result
    chosen = result.action.id if result and result.action else None
    if request.status == "submitted" and chosen == ANSWER_ACTION and result is not None:
        text = result.values.get(ANSWER_FIELD)
        return _allowed(review, "respond", request) | {"message": str(text or "")}
    if request.status == "submitted" and result is not None:
        # A route that requires reasons adds its own "reason" field to the card.
        said = result.values.get("reason") or result.values.get(ANSWER_FIELD)
        text = str(said or "").strip()
        who = request.decided_by.name if request.decided_by else None
        by = f" by {who}" if who else ""
        return _reject(review, request, f"Rejected{by}: {text}" if text else f"Rejected{by}.")
    message = (result.message if result else None) or f"askhuman request {request.ref} ended " \
        f"{request.status}"
    return _reject(review, request, f"{message} The tool was not run.")


def _reject(review: Review, request: HumanRequest, message: str) -> Decision:
    return _allowed(review, "reject", request) | {"message": message}


def _allowed(review: Review, kind: str, request: HumanRequest) -> Decision:
    if kind not in review.allowed:
        raise DecisionNotAllowed(review, kind, request)
    return {"type": kind}
