"""MCP servers as tools, through pydantic-ai's ``MCPToolset`` (FastMCP client).

pydantic-ai 2 replaced ``MCPServerStdio`` / ``MCPServerStreamableHTTP`` with one
``MCPToolset`` that takes a transport; we give it FastMCP's ``StdioTransport`` (a
subprocess) or a URL (Streamable HTTP). ``ManagedMcpServer`` adds the lifecycle a
long-running bot needs:

- lazy start: nothing is spawned or connected until a run first needs the tools;
- reuse: once connected, the session stays open across runs (a run's own enter/exit
  does not close it);
- restart: before each call a ping checks the server; a dead one is restarted. A
  server that dies *during* a call is restarted too, and the model gets a clear error
  saying the call's effect is unknown (it is never retried behind its back);
- shutdown: ``aclose`` ends the session and the subprocess.

Environment values (``env``, ``headers_env``) are read when the server starts, so a
missing variable is a clear error naming it, and no value is ever in the config.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets.abstract import AbstractToolset, ToolsetTool

from bot.tools.config import HttpServer, McpToolSettings, StdioServer
from bot.tools.mcp_fixed import hide_fixed

log = logging.getLogger("askhuman.tools")

PING_SECONDS = 5.0
CONNECTION_CLOSED = -32000
"""JSON-RPC error code the MCP SDK uses when the transport is gone."""
INIT_SECONDS = 20.0


class McpStartError(RuntimeError):
    """The server could not be started or reached; the message names what to fix."""


def server_label(server: StdioServer | HttpServer) -> str:
    """How people see a server in errors: its program or URL (never env values)."""
    return server.url if isinstance(server, HttpServer) else " ".join(server.command[:3])


def _env_values(names: list[str], what: str) -> dict[str, str]:
    missing = [n for n in names if n not in os.environ]
    if missing:
        raise McpStartError(f"{what} needs the environment variable(s) {', '.join(missing)}, "
                            "which are not set")
    return {n: os.environ[n] for n in names}


def build_mcp_toolset(
    server: StdioServer | HttpServer, timeout: float, quiet: bool = False
) -> MCPToolset[Any]:
    """A fresh ``MCPToolset`` for one configured server (reads the environment now).
    ``quiet`` sends a subprocess's stderr to the null device (``config check``)."""
    label = server_label(server)
    if isinstance(server, StdioServer):
        from fastmcp.client.transports import StdioTransport

        env = {k: v for k in ("PATH", "HOME", "LANG", "SYSTEMROOT") if (v := os.environ.get(k))}
        env.update(_env_values(server.env, f"MCP server {label!r}"))
        transport = StdioTransport(command=server.command[0], args=list(server.command[1:]),
                                   env=env, cwd=server.cwd, keep_alive=False,
                                   log_file=Path(os.devnull) if quiet else None)
        return MCPToolset(transport, tool_error_behavior="failed", init_timeout=INIT_SECONDS,
                          read_timeout=max(timeout * 2, 60.0))
    headers = {header: value for header, value in zip(
        server.headers_env, _env_values(list(server.headers_env.values()),
                                        f"MCP server {label!r}").values(), strict=True)}
    return MCPToolset(server.url, tool_error_behavior="failed", init_timeout=INIT_SECONDS,
                      read_timeout=max(timeout * 2, 60.0), headers=headers or None)


def schema_check(
    tool_def: ToolDefinition, fixed: Mapping[str, Any] | None = None
) -> Callable[..., None]:
    """Check arguments against the tool's JSON Schema before approval or execution.

    pydantic-ai passes MCP arguments through as given; an MCP server would only refuse
    bad ones after a person approved the call. Checking here turns them into a
    ``ModelRetry`` naming each problem, so nobody is asked about a call that cannot run.
    """
    from jsonschema.validators import validator_for

    schema = tool_def.parameters_json_schema or {"type": "object"}
    validator = validator_for(schema)(schema)

    def check(ctx: RunContext[Any], **args: Any) -> None:
        given = sorted(set(args) & set(fixed or {}))
        if given:
            raise ModelRetry(f"{', '.join(given)} of {tool_def.name} is set by the admin; "
                             "call it without that argument")
        errors = sorted(validator.iter_errors(args), key=lambda e: list(e.path))
        if errors:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e.path) or 'arguments'}: {e.message}"
                for e in errors[:10])
            raise ModelRetry(f"invalid arguments for {tool_def.name}: {problems}")

    return check


class ManagedMcpServer(AbstractToolset[Any]):
    """One configured MCP server, started on first use and kept up until ``aclose``.

    Only the tools the entry exposes (``include`` / ``exclude``) are listed.
    """

    def __init__(self, settings: McpToolSettings, toolset_id: str | None = None,
                 key: str = "tools", quiet: bool = False) -> None:
        self.settings = settings
        self.quiet = quiet
        self.key = key
        """The entry's config path, for errors (``tools.1``)."""
        self._id = toolset_id
        self._inner: MCPToolset[Any] | None = None
        self._lock = asyncio.Lock()
        self.restarts = 0
        """How often the server was restarted after dying (tests, health checks)."""

    @property
    def id(self) -> str | None:
        return self._id

    @property
    def label(self) -> str:
        return f"MCP server {server_label(self.settings.mcp)}"

    @property
    def running(self) -> bool:
        return self._inner is not None

    async def __aenter__(self) -> ManagedMcpServer:
        await self.ensure_started()
        return self

    async def __aexit__(self, *args: Any) -> bool | None:
        return None  # stays connected for the next run; ``aclose`` ends it

    async def ensure_started(self) -> MCPToolset[Any]:
        async with self._lock:
            return self._inner or await self._start()

    async def _start(self) -> MCPToolset[Any]:
        inner = build_mcp_toolset(self.settings.mcp, self.settings.timeout, self.quiet)
        try:
            await inner.__aenter__()
        except Exception as exc:
            raise McpStartError(f"cannot start {self.label}: {type(exc).__name__}: "
                                f"{exc}") from exc
        self._inner = inner
        log.info("mcp server started", extra={"server": self.label})
        return inner

    async def _stop(self) -> None:
        inner, self._inner = self._inner, None
        if inner is None:
            return
        try:
            await inner.__aexit__(None, None, None)
        except Exception:
            log.warning("mcp server did not close cleanly", exc_info=True,
                        extra={"server": self.label})

    async def restart(self) -> MCPToolset[Any]:
        async with self._lock:
            await self._stop()
            self.restarts += 1
            log.warning("restarting mcp server", extra={"server": self.label})
            return await self._start()

    async def aclose(self) -> None:
        """End the session and, for stdio, the subprocess (shutdown)."""
        async with self._lock:
            await self._stop()

    async def _alive(self, inner: MCPToolset[Any]) -> bool:
        """A ping; any JSON-RPC answer (even "method not found", which newer servers give
        for ping) means the server is there. Only a closed connection or silence is dead."""
        from mcp.shared.exceptions import MCPError

        try:
            await asyncio.wait_for(inner.client.ping(), PING_SECONDS)
        except MCPError as exc:
            return exc.code != CONNECTION_CLOSED
        except Exception:
            return False
        return True

    async def _healthy(self) -> MCPToolset[Any]:
        """The connected toolset, restarted first if the server stopped answering."""
        inner = await self.ensure_started()
        return inner if await self._alive(inner) else await self.restart()

    async def schemas(self) -> dict[str, dict[str, Any]]:
        """Exposed tool → its input JSON Schema, straight from the server (config check)."""
        inner = await self.ensure_started()
        return {tool.name: dict(tool.input_schema) for tool in await inner.list_tools()
                if self.settings.exposes(tool.name)}

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        inner = await self._healthy()
        tools = await inner.get_tools(ctx)
        fixed = self.settings.fixed
        shown = {name: hide_fixed(tool, fixed.get(name, {}), f"{self.key}.fixed.{name}")
                 for name, tool in tools.items() if self.settings.exposes(name)}
        return {name: replace(tool, args_validator_func=schema_check(tool.tool_def,
                                                                     fixed.get(name, {})))
                for name, tool in shown.items()}

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any],
        tool: ToolsetTool[Any],
    ) -> Any:
        inner = await self._healthy()
        tool_args = {**tool_args, **self.settings.fixed.get(name, {})}  # the admin's win
        try:
            return await inner.call_tool(name, tool_args, ctx, tool)
        except Exception:
            if await self._alive(inner):
                raise  # a real tool error: the guard reports it to the model
            await self.restart()
            raise ToolFailed(f"The MCP server behind {name} stopped during the call and was "
                             "restarted; whether the call took effect is unknown.") from None
