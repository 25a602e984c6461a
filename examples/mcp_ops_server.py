"""A small MCP server for ops chores, built with the official ``mcp`` SDK.

Run it over stdio (how ``mcp: {command: [...]}`` starts it)::

    python examples/mcp_ops_server.py

or over Streamable HTTP on loopback (``mcp: {url: http://127.0.0.1:9000/mcp}``)::

    python examples/mcp_ops_server.py --http 9000

Every tool that changes something appends a line to ``$OPS_JOURNAL`` (if set), so
a test or an admin can see exactly which calls ran, and how often. ``whoami`` tells
whether ``OPS_TOKEN`` reached the server (never its value). ``crash`` ends the
process at once, and ``sleep`` hangs, for restart and timeout drills.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("ops", instructions="Scale services and read their status.")
_replicas: dict[str, int] = {}


def _journal(line: str) -> None:
    path = os.environ.get("OPS_JOURNAL")
    if path:
        with Path(path).open("a", encoding="utf-8") as journal:
            journal.write(f"{line} pid={os.getpid()}\n")


@server.tool()
def scale(service: str, replicas: int) -> str:
    """Scale a service to a number of replicas."""
    if replicas < 0:
        raise ValueError("replicas must be zero or more")
    _replicas[service] = replicas
    _journal(f"scale {service} {replicas}")
    return f"{service} now runs {replicas} replica(s)"


@server.tool()
def status(service: str) -> str:
    """How many replicas a service runs (read-only)."""
    return f"{service}: {_replicas.get(service, 1)} replica(s)"


@server.tool()
def whoami() -> str:
    """Whether the server was given its token (the value is never shown)."""
    return "token: set" if os.environ.get("OPS_TOKEN") else "token: missing"


@server.tool()
async def sleep(seconds: float) -> str:
    """Wait, then answer (a slow call)."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}s"


@server.tool()
def crash() -> str:
    """Stop the server process immediately (a crash drill)."""
    _journal("crash")
    os._exit(3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT",
                        help="serve Streamable HTTP on 127.0.0.1:PORT instead of stdio")
    options = parser.parse_args()
    if options.http:
        server.run("streamable-http", host="127.0.0.1", port=options.http)
    else:
        server.run()


if __name__ == "__main__":
    main()
