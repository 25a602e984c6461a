"""What an admin configures for one agent; the runtime is built from this alone."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.askhuman.config import AskHumanConfig


@dataclass(frozen=True)
class AgentSpec:
    """One agent: a pydantic-ai model id (or ``scripted:<name>``) plus its guardrails."""

    name: str
    model: str
    instructions: str = ""
    ask_human: AskHumanConfig = field(default_factory=AskHumanConfig)
