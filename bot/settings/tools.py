"""The ``tools:`` list under an agent. Its models live in ``bot.tools.config``, next to
the code that runs tools; here are the checks that need the rest of the file."""

from __future__ import annotations

from bot.settings.agents import AgentSettings
from bot.settings.base import KeyPathError
from bot.settings.routes import RouteSettings
from bot.tools.config import ToolSettings

__all__ = ["ToolSettings", "check_tool_routes"]


def check_tool_routes(
    agent_name: str, agent: AgentSettings, routes: dict[str, RouteSettings]
) -> None:
    """A tool's ``route:`` (where its approvals go) must name a defined route."""
    for index, tool in enumerate(agent.tools):
        if tool.route is not None and tool.route not in routes:
            known = ", ".join(sorted(routes)) or "none defined"
            raise KeyPathError(f"agents.{agent_name}.tools.{index}.route",
                               f"route '{tool.route}' is not defined under routes "
                               f"(known routes: {known})")
