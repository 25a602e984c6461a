"""What the API returns, typed. Unknown keys are kept (``extra="allow"``), so a newer
server never breaks an older client."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["pending", "submitted", "timeout", "cancelled", "unavailable"]
ListStatus = Literal["open", "resolved", "pending", "submitted", "timeout", "cancelled",
                     "unavailable"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class Action(_Model):
    id: str
    label: str | None = None


class AskHumanResult(_Model):
    """Dify's ``AskHumanToolResult``: what the person answered, or why nobody did."""

    status: str
    action: Action | None = None
    values: dict[str, Any] = Field(default_factory=dict)
    message: str | None = None


class Decision(_Model):
    """An approval's answer: approved or not, and the approver's note (or why not)."""

    approved: bool
    reason: str


class Decider(_Model):
    """Who decided: the platform (``slack``, ``feishu``…), their id there, their name."""

    platform: str
    user_id: str | None = None
    name: str | None = None


class HumanRequest(_Model):
    """A request (an ask or an approval) as ``GET /api/v1/requests/{ref}`` shows it."""

    ref: str
    kind: str
    status: Status | str
    route: str
    agent_name: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    created_at: dt.datetime | None = None
    deadline: dt.datetime | None = None
    decided_at: dt.datetime | None = None
    decided_by: Decider | None = None
    result: AskHumanResult | None = None
    context: dict[str, Any] | None = None
    idempotency_key: str | None = None
    links: dict[str, str] = Field(default_factory=dict)
    tool_name: str | None = None
    decision: Decision | None = None
    updated_input: dict[str, Any] | None = None

    @property
    def resolved(self) -> bool:
        return self.status != "pending"


class RequestPage(_Model):
    """One page of ``GET /api/v1/requests``, newest first; ``next_cursor`` for the next."""

    items: list[HumanRequest]
    next_cursor: str | None = None
