"""From an agent's ``tools:`` config to the toolsets its pydantic-ai agent runs with."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic_ai import FunctionToolset
from pydantic_ai.toolsets.abstract import AbstractToolset

from bot.tools.config import McpToolSettings, PythonToolSettings, ToolSettings
from bot.tools.guard import GuardedToolset, ToolPolicy
from bot.tools.python import ToolConfigError, build_python_tool

if TYPE_CHECKING:
    from bot.tools.mcp import ManagedMcpServer


@dataclass
class AgentTools:
    """The guarded toolsets of one agent, plus what a resume needs to re-check a call."""

    toolsets: list[AbstractToolset[Any]] = field(default_factory=list)
    fixed: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Python tool name → its ``fixed`` values (MCP tools have none)."""
    servers: list[ManagedMcpServer] = field(default_factory=list)

    def fixed_for(self, tool: str) -> dict[str, Any]:
        return self.fixed.get(tool, {})

    async def aclose(self) -> None:
        """Close every MCP session and subprocess (shutdown)."""
        for server in self.servers:
            await server.aclose()


def build_agent_tools(agent: str, entries: Sequence[ToolSettings]) -> AgentTools:
    """One guarded toolset per entry; ``ToolConfigError`` (key ``tools.N...``) if one is bad."""
    tools = AgentTools()
    for index, entry in enumerate(entries):
        try:
            tools.toolsets.append(_entry_toolset(agent, entry, tools))
        except ToolConfigError as exc:
            raise ToolConfigError(f"tools.{index}.{exc.key}", str(exc)) from None
    return tools


def _entry_toolset(agent: str, entry: ToolSettings, tools: AgentTools) -> AbstractToolset[Any]:
    common = {"fixed": {}, "timeout": entry.timeout, "max_output_chars": entry.max_output_chars,
              "route": entry.route}
    if isinstance(entry, PythonToolSettings):
        built = build_python_tool(entry)
        name = built.tool.name
        if name in tools.fixed:
            raise ToolConfigError("python", f"another tool of this agent is also called {name!r};"
                                  " set name: to tell them apart")
        tools.fixed[name] = built.fixed
        fixed_policy = ToolPolicy.of(entry.approval, **{**common, "fixed": built.fixed})
        return GuardedToolset(FunctionToolset([built.tool]), agent=agent,
                              policy=lambda _name: fixed_policy)
    assert isinstance(entry, McpToolSettings)
    from bot.tools.mcp import ManagedMcpServer  # the MCP client is imported only when used

    server = ManagedMcpServer(entry)
    tools.servers.append(server)
    policies: dict[str, ToolPolicy] = {}

    def policy(name: str) -> ToolPolicy:
        if name not in policies:
            policies[name] = ToolPolicy.of(entry.approval_for(name), **common)
        return policies[name]

    return GuardedToolset(server, agent=agent, policy=policy)
