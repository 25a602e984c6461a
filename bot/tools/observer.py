"""How a run tells the engine that a tool starts and finishes (audit, thread line).

The guard calls ``started`` before the tool runs and ``finished`` after it returned,
failed or timed out. The engine's observer writes each as a committed audit row (and
the finish as one short line in the run's thread), so a process that dies mid-call
leaves "tool started" without "tool finished" for an admin to see.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

LINE_VALUE_CHARS = 40
LINE_CHARS = 300


@dataclass(frozen=True)
class ToolCall:
    """One call about to run."""

    tool: str
    tool_call_id: str
    args: dict[str, Any]
    """The model's validated arguments (``fixed`` values not included)."""
    binding: str | None = None
    """The approved hash, for calls that went through an approval."""


@dataclass(frozen=True)
class ToolDone:
    """How one call ended."""

    call: ToolCall
    ok: bool
    seconds: float
    error: str | None = None

    @property
    def line(self) -> str:
        """E.g. ``Ran restart_service(service=api): ok`` (untrusted values: adapters escape)."""
        outcome = "ok" if self.ok else f"error: {self.error or 'failed'}"
        text = f"Ran {self.call.tool}({call_args(self.call.args)}): {outcome}"
        return text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 1] + "…"


def call_args(args: dict[str, Any]) -> str:
    """``service=api, replicas=3``: compact, each value cut to a few characters."""
    parts = []
    for key, value in args.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                               default=str)
        text = " ".join(str(text).split())
        if len(text) > LINE_VALUE_CHARS:
            text = text[: LINE_VALUE_CHARS - 1] + "…"
        parts.append(f"{key}={text}")
    return ", ".join(parts)


class ToolObserver(Protocol):
    """Implemented by the engine; both calls must be durable before they return."""

    async def started(self, call: ToolCall) -> None: ...

    async def finished(self, done: ToolDone) -> None: ...


@dataclass(frozen=True)
class ToolDeps:
    """The agent run's ``deps``: where the guard reports tool calls."""

    observer: ToolObserver | None = None
