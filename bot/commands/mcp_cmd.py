"""``askhuman mcp``: serve the MCP tools over stdio for one API client."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from bot.logs import configure_logging

KEY_ENV = "ASKHUMAN_API_KEY"
URL_ENV = "ASKHUMAN_URL"


def register(app: typer.Typer) -> None:
    @app.command("mcp")
    def mcp(
        route: Annotated[str | None, typer.Option(
            help="Default route (one of the client's routes; default: its first).")] = None,
        url: Annotated[str | None, typer.Option(
            help=f"The askhuman server (default: ${URL_ENV}, else http://127.0.0.1:3000).")
        ] = None,
        progress_seconds: Annotated[float, typer.Option(
            help="Seconds between progress notifications while waiting.")] = 15.0,
        local_answers: Annotated[bool, typer.Option(
            help="Also offer ask_human forms to the MCP client's user (elicitation).")] = True,
        editable: Annotated[list[str] | None, typer.Option(
            metavar="TOOL:ARG[,ARG…]",
            help="Repeatable: approvers may edit these arguments of this "
                 "tool's request_approval calls, e.g. Bash:command for Claude Code's "
                 "--permission-prompt-tool.")] = None,
        log_level: Annotated[str, typer.Option(help="Logs go to stderr.")] = "warning",
    ) -> None:
        """MCP server over stdio (tools ask_human, request_approval), acting for the API
        client whose key is in ASKHUMAN_API_KEY."""
        import anyio

        from bot.mcp.stdio import StdioError, serve_stdio
        from bot.mcp.tools import ToolOptions, parse_editable

        configure_logging(log_level)
        key = os.environ.get(KEY_ENV, "").strip()
        if not key:
            typer.echo(f"error: {KEY_ENV} is not set; create a key with 'askhuman api-key "
                       "create NAME --routes ROUTE' and put it in the MCP client's env",
                       err=True)
            raise typer.Exit(2)
        base = url or os.environ.get(URL_ENV) or "http://127.0.0.1:3000"
        options = ToolOptions(progress_seconds=progress_seconds, local_answers=local_answers)
        try:
            rules = parse_editable(editable or [])
        except ValueError as exc:
            typer.echo(f"error: --{exc}", err=True)
            raise typer.Exit(2) from None
        try:
            anyio.run(serve_stdio, base, key, route, options, rules)
        except StdioError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
