"""The renderers' input: one request as a person should see it, at one moment.

The engine builds a ``RequestCard`` from its stored request; renderers turn it into
platform JSON. Keeping this a plain dataclass means renderers stay pure and never
import the engine or storage.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import JsonValue

from bot.askhuman.schema import AskHumanToolArgs

CardStatus = Literal["pending", "submitted", "timeout", "cancelled", "unavailable"]


@dataclass(frozen=True)
class RequestCard:
    """Everything a renderer needs; model-written text lives only inside ``args``."""

    ref: str
    """Opaque, unguessable request reference carried in buttons and callbacks."""
    args: AskHumanToolArgs
    """Normalized (validated) ask_human arguments. Untrusted text."""
    agent_name: str
    deadline: dt.datetime | None = None
    version: int = 1
    """Message version; Slack block_ids change with it so stale input is dropped."""
    status: CardStatus = "pending"
    decided_by_id: str | None = None
    """Platform user id of the person who decided (trusted, from the platform)."""
    decided_by_name: str | None = None
    decided_at: dt.datetime | None = None
    action_id: str | None = None
    action_label: str | None = None
    values: Mapping[str, JsonValue] = field(default_factory=dict)
    message: str | None = None
    """System text for timeout / cancel / unavailable (trusted, but still escaped)."""
    votes: int = 0
    quorum: int = 1
