"""What ``askhuman config check`` verifies about tools beyond the YAML's shape.

The settings model already refuses bad shapes, ``when`` rules that do not compile and
unknown routes. These checks need the environment the bot will run in: does each
import path resolve, does each ``fixed`` key exist on the function (and fit its
type), is each MCP command installed, and do two entries give the model the same
tool name (Python tools and MCP ``include`` lists; ``bot.tools.names``). Environment
variables an MCP server needs but that are not set here are reported as notes (the
check may run on another machine).

With ``reach=True`` (``askhuman config check``) each MCP server is also started or
connected once and listed, so a name two servers share, and a ``fixed`` key or value
the server's tool does not take, are found before the bot runs. A server that cannot
be reached is a note: every run checks the same again (``CheckedToolset``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Mapping, Sequence
from typing import Any

from bot.tools.config import HttpServer, McpToolSettings, PythonToolSettings, ToolSettings
from bot.tools.mcp_fixed import fixed_problems
from bot.tools.names import NameBook, owner_of, static_names
from bot.tools.python import ToolConfigError, build_python_tool

REACH_SECONDS = 30.0


def check_tools(
    agents: Mapping[str, Sequence[ToolSettings]], reach: bool = False,
) -> tuple[list[str], list[str]]:
    """``(problems, notes)`` for every agent's tools, each prefixed with its key path."""
    problems: list[str] = []
    notes: list[str] = []
    for agent, tools in agents.items():
        names: dict[str, int] = {}
        book = NameBook()
        for index, tool in enumerate(tools):
            key = f"agents.{agent}.tools.{index}"
            if isinstance(tool, PythonToolSettings):
                found = _check_python(key, tool, names, index)
                problems += found
                if not found:
                    book.claim([next(n for n, i in names.items() if i == index)],
                               owner_of(key, tool))
            elif isinstance(tool, McpToolSettings):
                found, missing = _check_mcp(key, tool)
                problems += found
                notes += missing
                book.claim(static_names(tool), owner_of(key, tool))
        problems += book.problems
        if reach and not book.problems:
            found, missing = asyncio.run(_reach(agent, tools, book))
            problems += found
            notes += missing
    return problems, notes


async def _reach(
    agent: str, tools: Sequence[ToolSettings], book: NameBook
) -> tuple[list[str], list[str]]:
    """List each MCP server's tools: shared names and ``fixed`` keys the server lacks."""
    from bot.tools.mcp import ManagedMcpServer

    problems: list[str] = []
    notes: list[str] = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, McpToolSettings):
            continue
        key = f"agents.{agent}.tools.{index}"
        server = ManagedMcpServer(tool, key=key, quiet=True)
        try:
            schemas = await asyncio.wait_for(server.schemas(), REACH_SECONDS)
        except Exception as exc:  # unreachable here: the run checks again
            notes.append(f"{key}.mcp: could not list the server's tools here ({exc}); tool "
                         "names and fixed arguments are checked when a run starts")
            continue
        finally:
            await server.aclose()
        book.claim([tool.visible_name(name) for name in schemas], owner_of(key, tool))
        for name, values in tool.fixed.items():
            if name not in schemas:
                problems.append(f"{key}.fixed.{name}: the server has no tool {name!r}; its "
                                f"tools are: {', '.join(sorted(schemas)) or 'none'}")
            else:
                problems += fixed_problems(schemas[name], values, f"{key}.fixed.{name}")
        problems += _editable_problems(key, tool, schemas)
    return problems + book.problems, notes


def _editable_problems(key: str, tool: McpToolSettings,
                       schemas: dict[str, dict[str, Any]]) -> list[str]:
    """``editable`` must name tools the server has, and parameters those tools take."""
    problems: list[str] = []
    for name, editable in tool.editable.items():
        if name not in schemas:
            problems.append(f"{key}.editable.{name}: the server has no tool {name!r}; its "
                            f"tools are: {', '.join(sorted(schemas)) or 'none'}")
            continue
        params = schemas[name].get("properties") or {}
        for arg in editable:
            if arg not in params:
                problems.append(f"{key}.editable.{name}.{arg}: the tool has no parameter "
                                f"{arg!r}; its parameters are: {', '.join(params) or 'none'}")
    return problems


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
