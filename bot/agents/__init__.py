"""Agent runtimes behind one interface: ``run(prompt)`` / ``resume(snapshot, results)``."""

from bot.agents.base import (
    AgentRuntime,
    AgentRuntimeError,
    Outcome,
    ResumeMismatchError,
    ToolBindingError,
    UnknownModelError,
)
from bot.agents.local import LocalRuntime
from bot.agents.spec import AgentSpec


def build_runtime(spec: AgentSpec) -> AgentRuntime:
    """The runtime for one configured agent (only the embedded one exists today)."""
    return LocalRuntime(spec)


__all__ = [
    "AgentRuntime",
    "AgentRuntimeError",
    "AgentSpec",
    "LocalRuntime",
    "Outcome",
    "ResumeMismatchError",
    "ToolBindingError",
    "UnknownModelError",
    "build_runtime",
]
