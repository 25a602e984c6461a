"""What ``askhuman config check`` verifies about tools beyond the YAML's shape.

The settings model already refuses bad shapes, ``when`` rules that do not compile and
unknown routes. These checks need the environment the bot will run in: does each
import path resolve, does each ``fixed`` key exist on the function (and fit its
type), is each MCP command installed. Environment variables an MCP server needs but
that are not set here are reported as notes (the check may run on another machine).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence

from bot.tools.config import HttpServer, McpToolSettings, PythonToolSettings, ToolSettings
from bot.tools.python import ToolConfigError, build_python_tool


def check_tools(
    agents: Mapping[str, Sequence[ToolSettings]],
) -> tuple[list[str], list[str]]:
    """``(problems, notes)`` for every agent's tools, each prefixed with its key path."""
    problems: list[str] = []
    notes: list[str] = []
    for agent, tools in agents.items():
        names: dict[str, int] = {}
        for index, tool in enumerate(tools):
            key = f"agents.{agent}.tools.{index}"
            if isinstance(tool, PythonToolSettings):
                problems += _check_python(key, tool, names, index)
            elif isinstance(tool, McpToolSettings):
                found, missing = _check_mcp(key, tool)
                problems += found
                notes += missing
    return problems, notes


def _check_python(
    key: str, tool: PythonToolSettings, names: dict[str, int], index: int
) -> list[str]:
    try:
        built = build_python_tool(tool)
    except ToolConfigError as exc:
        return [f"{key}.{exc.key}: {exc}"]
    name = built.tool.name
    if name in names:
        return [f"{key}.python: tool {index} and tool {names[name]} are both called {name!r}; "
                "set name: on one of them"]
    names[name] = index
    return []


def _check_mcp(key: str, tool: McpToolSettings) -> tuple[list[str], list[str]]:
    server = tool.mcp
    if isinstance(server, HttpServer):
        needed = list(server.headers_env.values())
        problems: list[str] = []
    else:
        program = server.command[0]
        needed = list(server.env)
        problems = [] if _runnable(program, server.cwd) else [
            f"{key}.mcp.command: program {program!r} was not found; install it or give its "
            "full path"]
    notes = [f"{key}.mcp: environment variable {name} is not set here; the server will not "
             "start without it" for name in needed if name not in os.environ]
    return problems, notes


def _runnable(program: str, cwd: str | None) -> bool:
    if os.sep in program:
        path = program if os.path.isabs(program) or cwd is None else os.path.join(cwd, program)
        return os.path.isfile(path) and os.access(path, os.X_OK)
    return shutil.which(program) is not None
