"""From an agent's ``tools:`` config to the toolsets its pydantic-ai agent runs with.

MCP tools are renamed with pydantic-ai's own ``PrefixedToolset`` (``.prefixed``), and
all entries are combined in a ``CheckedToolset`` that refuses a shared tool name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic_ai import FunctionToolset
from pydantic_ai.toolsets.abstract import AbstractToolset

from bot.tools.config import McpToolSettings, PythonToolSettings, ToolSettings
from bot.tools.guard import GuardedToolset, ToolPolicy
from bot.tools.names import CheckedToolset, NameBook, Owner, owner_of, static_names
from bot.tools.python import ToolConfigError, build_python_tool

if TYPE_CHECKING:
    from bot.tools.mcp import ManagedMcpServer


@dataclass
class AgentTools:
    """The guarded toolsets of one agent, plus what a resume needs to re-check a call."""

    toolsets: list[AbstractToolset[Any]] = field(default_factory=list)
    fixed: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Tool name, as the model calls it → its ``fixed`` values (Python and MCP tools)."""
    python_names: list[str] = field(default_factory=list)
    servers: list[ManagedMcpServer] = field(default_factory=list)

    def fixed_for(self, tool: str) -> dict[str, Any]:
        return self.fixed.get(tool, {})

    async def aclose(self) -> None:
        """Close every MCP session and subprocess (shutdown)."""
        for server in self.servers:
            await server.aclose()


def build_agent_tools(
    agent: str, entries: Sequence[ToolSettings], reserved: Mapping[str, str] | None = None
) -> AgentTools:
    """One guarded toolset per entry, combined so that a shared tool name stops the run
    (``bot.tools.names``); ``ToolConfigError`` (key ``tools.N...``) if one is bad.

    ``reserved`` maps names taken outside ``entries`` (the ask_human tool) to what
    takes them."""
    tools = AgentTools()
    guarded: list[AbstractToolset[Any]] = []
    owners: list[Owner] = []
    taken = {name: Owner(f"agents.{agent}.ask_human", what)
             for name, what in (reserved or {}).items()}
    book = NameBook(dict(taken))
    for index, entry in enumerate(entries):
        try:
            guarded.append(_entry_toolset(agent, entry, tools, index))
        except ToolConfigError as exc:
            raise ToolConfigError(f"tools.{index}.{exc.key}", str(exc)) from None
        owners.append(owner_of(f"agents.{agent}.tools.{index}", entry))
        book.claim(_known_names(entry, tools), owners[-1])
        if book.problems:
            raise ToolConfigError(f"tools.{index}", book.problems[0])
    if guarded:
        tools.toolsets.append(CheckedToolset(guarded, owners=owners, reserved=taken))
    return tools


def _known_names(entry: ToolSettings, tools: AgentTools) -> list[str]:
    if isinstance(entry, PythonToolSettings):
        return [tools.python_names[-1]]
    assert isinstance(entry, McpToolSettings)
    return static_names(entry)


def _entry_toolset(
    agent: str, entry: ToolSettings, tools: AgentTools, index: int
) -> AbstractToolset[Any]:
    common = {"fixed": {}, "timeout": entry.timeout, "max_output_chars": entry.max_output_chars,
              "route": entry.route, "grant_scope": entry.grant_scope}
    if isinstance(entry, PythonToolSettings):
        built = build_python_tool(entry)
        name = built.tool.name
        if name in tools.python_names:
            raise ToolConfigError("python", f"another tool of this agent is also called {name!r};"
                                  " set name: to tell them apart")
        tools.python_names.append(name)
        tools.fixed[name] = built.fixed
        fixed_policy = ToolPolicy.of(entry.approval, **{**common, "fixed": built.fixed,
                                                        "editable": tuple(entry.editable)})
        return GuardedToolset(FunctionToolset([built.tool]), agent=agent,
                              policy=lambda _name: fixed_policy)
    assert isinstance(entry, McpToolSettings)
    from bot.tools.mcp import ManagedMcpServer  # the MCP client is imported only when used

    server = ManagedMcpServer(entry, key=f"agents.{agent}.tools.{index}")
    tools.servers.append(server)
    for tool, values in entry.fixed.items():
        tools.fixed[entry.visible_name(tool)] = dict(values)
    policies: dict[str, ToolPolicy] = {}

    def policy(name: str) -> ToolPolicy:
        if name not in policies:
            own = entry.server_name(name)
            policies[name] = ToolPolicy.of(entry.approval_for(own), **{
                **common, "fixed": dict(entry.fixed.get(own, {})),
                "editable": tuple(entry.editable.get(own, []))})
        return policies[name]

    inner = server.prefixed(f"{entry.prefix}_") if entry.prefix else server
    return GuardedToolset(inner, agent=agent, policy=policy)
