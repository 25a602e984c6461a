"""Agent runtimes behind one interface: ``run(prompt)`` / ``resume(snapshot, results)``.

The engine builds a runtime on an agent's first run (``bot.engine.runtimes``), so the
embedded runtime and pydantic-ai behind it (some 600 modules, about 30 MB) are imported
then, not when the engine merely names ``bot.agents.base``'s types: an idle server, or
one whose agents never run here, does not hold them (``serve --workers N`` imports them
in its parent when agents are configured, so the forked workers share them:
``commands.forked_workers.preload``). The names below are imported on first use
(PEP 562).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_EXPORTS = {
    "AgentRuntime": "base", "AgentRuntimeError": "base", "Outcome": "base",
    "ResumeMismatchError": "base", "ToolBindingError": "base", "UnknownModelError": "base",
    "LocalRuntime": "local", "AgentSpec": "spec",
}


def build_runtime(spec: "AgentSpec") -> "AgentRuntime":
    """The runtime for one configured agent (only the embedded one exists today)."""
    from bot.agents.local import LocalRuntime

    return LocalRuntime(spec)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)


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
