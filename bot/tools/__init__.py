"""Admin-configured tools for embedded agents, and human approval of risky calls.

- ``config`` — the ``tools:`` entries (Python import paths, MCP servers, approval
  ``never | always | {when: CEL}``, ``fixed`` values, route, timeout, output cap);
- ``python`` / ``mcp`` — the toolsets, ``guard`` — approval, audit, timeout, cap;
- ``approval`` — requests and tickets as data and the one answer → ``ToolApproved`` /
  ``ToolDenied`` mapping; ``binding`` — the hash that ties an approval to one call;
- ``observer`` — how a run reports "tool started" / "tool finished" to the engine;
- ``check`` — the environment checks behind ``askhuman config check``.

Only the light data modules are imported here; ``bot.tools.build`` (which pulls in
the MCP client) is imported by the runtime when an agent actually has tools.
"""

from bot.tools.approval import (
    ApprovalTicket,
    ToolApprovalRequest,
    approval_result,
)
from bot.tools.binding import binding_hash, short
from bot.tools.config import ToolSettings
from bot.tools.observer import ToolCall, ToolDeps, ToolDone, ToolObserver

__all__ = [
    "ApprovalTicket",
    "ToolApprovalRequest",
    "ToolCall",
    "ToolDeps",
    "ToolDone",
    "ToolObserver",
    "ToolSettings",
    "approval_result",
    "binding_hash",
    "short",
]
