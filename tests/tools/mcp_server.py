"""Start ``examples/mcp_ops_server.py`` for real: its stdio command, or a loopback
Streamable HTTP process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVER = str(ROOT / "examples" / "mcp_ops_server.py")
STDIO_COMMAND = [sys.executable, SERVER]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def http_server(journal: Path) -> Iterator[str]:
    """The example server over Streamable HTTP on 127.0.0.1; yields its /mcp URL."""
    port = free_port()
    env = {**os.environ, "OPS_JOURNAL": str(journal)}
    process = subprocess.Popen([sys.executable, SERVER, "--http", str(port)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise AssertionError("the MCP HTTP server did not start")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


def journal_lines(journal: Path) -> list[str]:
    return journal.read_text().splitlines() if journal.exists() else []


def pids(journal: Path) -> list[int]:
    return [int(line.rsplit("pid=", 1)[1]) for line in journal_lines(journal)]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
