"""What an admin configures for one agent; the runtime is built from this alone."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.askhuman.config import AskHumanConfig
from bot.tools.config import ToolSettings


@dataclass(frozen=True)
class AgentSpec:
    """One agent: a pydantic-ai model id (or ``scripted:<name>``) plus its guardrails."""

    name: str
    model: str
    instructions: str = ""
    ask_human: AskHumanConfig = field(default_factory=AskHumanConfig)
    tools: tuple[ToolSettings, ...] = ()
    """Admin-configured Python and MCP tools (``bot.tools.config``)."""
