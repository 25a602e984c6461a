"""Three realistic requests, each in every state, with fixed UTC datetimes."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from bot.askhuman.schema import AskHumanToolArgs
from renderers.card import RequestCard

DEADLINE = dt.datetime(2025, 3, 14, 18, 0, tzinfo=dt.UTC)
DECIDED_AT = dt.datetime(2025, 3, 14, 9, 26, 53, tzinfo=dt.UTC)
STATES = ("pending", "submitted", "timeout", "cancelled", "unavailable")

DEPLOY: dict[str, Any] = {
    "title": "Deploy checkout-service v2.14.0?",
    "question": "CI is green. Approve the rollout of checkout-service v2.14.0?",
    "markdown": (
        "## Changes\n\n- Retry payment webhooks (#412)\n- Bump `stripe` to 9.1\n\n"
        "| check | result |\n|---|---|\n| unit | ✅ 1,204 passed |\n| e2e | ✅ 88 passed |\n\n"
        "[Release notes](https://example.com/releases/2.14.0)"
    ),
    "fields": [
        {
            "name": "environment", "label": "Target environment", "type": "select",
            "required": True, "default": "staging",
            "options": [
                {"value": "staging", "label": "Staging"},
                {"value": "production", "label": "Production"},
            ],
        }
    ],
    "actions": [
        {"id": "approve", "label": "Approve", "style": "primary"},
        {"id": "reject", "label": "Reject", "style": "destructive"},
    ],
    "urgency": "high",
}

REFUND: dict[str, Any] = {
    "question": "Customer #88213 asks for a refund of order A-5521. How much should we refund?",
    "markdown": "The order was **delivered late** (6 days). Policy allows up to *50%* back.",
    "fields": [
        {"name": "amount", "label": "Refund amount (EUR)", "type": "number", "required": True,
         "min_value": 0, "max_value": 129.9, "default": 25},
        {"name": "reason", "label": "Reason for the customer", "type": "paragraph",
         "placeholder": "Shown to the customer in the refund e-mail"},
    ],
    "actions": [{"id": "refund", "label": "Issue refund", "style": "primary"},
                {"id": "deny", "label": "Deny"}],
}

INCIDENT: dict[str, Any] = {
    "title": "Triage INC-2291: elevated 5xx on api-gateway",
    "question": "Which services are affected, and when should the post-mortem happen?",
    "markdown": "Error rate 4.2% since 09:12 UTC.\n\n> Pager rotation: @here was NOT notified.",
    "fields": [
        {"name": "services", "label": "Affected services", "type": "multi-select",
         "default": ["gateway"],
         "options": [{"value": "gateway", "label": "api-gateway"},
                     {"value": "auth", "label": "auth"},
                     {"value": "billing", "label": "billing"}]},
        {"name": "postmortem", "label": "Post-mortem date", "type": "date",
         "default": "2025-03-17"},
        {"name": "customer_facing", "label": "Customer facing?", "type": "checkbox",
         "default": False},
    ],
    "actions": [{"id": "ack", "label": "Acknowledge", "style": "primary"},
                {"id": "escalate", "label": "Escalate", "style": "destructive"},
                {"id": "dismiss", "label": "Dismiss"}],
}

ANSWERS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "deploy": ("approve", "Approve", {"environment": "production"}),
    "refund": ("refund", "Issue refund", {"amount": 25, "reason": "Sorry for the delay!"}),
    "incident": ("escalate", "Escalate",
                 {"services": ["gateway", "auth"], "postmortem": "2025-03-18",
                  "customer_facing": True}),
}
REQUESTS = {"deploy": DEPLOY, "refund": REFUND, "incident": INCIDENT}


def args_for(raw: dict[str, Any]) -> AskHumanToolArgs:
    args = AskHumanToolArgs.model_validate(raw)
    return args


def make_card(name: str, state: str = "pending") -> RequestCard:
    """The named request in ``state``, deterministic down to the second."""
    card = RequestCard(
        ref=f"req_{name}_7f3a", args=args_for(REQUESTS[name]), agent_name="ops-agent",
        deadline=DEADLINE, version=1,
    )
    if state == "pending":
        return card
    changes: dict[str, Any] = {"status": state, "version": 2, "decided_at": DECIDED_AT}
    if state == "submitted":
        action_id, label, values = ANSWERS[name]
        changes.update(decided_by_id="U024BE7LH", decided_by_name="Alice Chen",
                       action_id=action_id, action_label=label, values=values)
    elif state == "timeout":
        changes["message"] = "The human did not respond before the workflow timeout."
    elif state == "cancelled":
        changes.update(message="Cancelled by the run owner.", decided_by_name="Bob")
    else:
        changes["message"] = "Could not deliver the request to any approver."
    return dataclasses.replace(card, **changes)


def _markdown(size: int) -> str:
    block = (
        "## Section {i}\n\nSome **bold** and *italic* text with `code` and a "
        "[link](https://example.com/{i}) plus <!channel> and @here noise.\n\n"
        "- item one\n- item two\n  - nested item\n\n"
        "| a | b |\n|---|---|\n| {i} | x |\n\n```\nprint({i})\n```\n\n> quoted line\n\n"
    )
    out, i = "", 0
    while len(out) < size:
        out += block.format(i=i)
        i += 1
    return out[:size]


def max_card() -> RequestCard:
    """The largest request the default config accepts (benchmarks/render.py times it)."""
    fields = [
        {
            "name": f"field_{f}", "label": f"Field {f} " + "l" * 100, "type": "select",
            "required": f % 2 == 0, "default": f"value-{f}-7",
            "options": [
                {"value": f"value-{f}-{o}", "label": f"Option {o} " + "x" * 190}
                for o in range(100)
            ],
        }
        for f in range(8)
    ]
    actions = [
        {"id": f"act{a}", "label": f"Action {a}", "style": s}
        for a, s in enumerate(["primary", "destructive", "default", "default"])
    ]
    args = AskHumanToolArgs.model_validate({
        "title": "A maximum-size request", "question": "q" * 1000,
        "markdown": _markdown(8000), "fields": fields, "actions": actions, "urgency": "high",
    })
    return RequestCard(ref="req_bench_0001", args=args, agent_name="bench", deadline=DEADLINE)
