"""Real Python tools the tests configure by import path; each call leaves a trace."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from pathlib import Path
from typing import Annotated

from pydantic import Field

CALLS: list[tuple[str, dict[str, object]]] = []
"""In-process record of every call (tests in the same process read it)."""


def _journal(line: str) -> None:
    """Also append to $TOOLS_JOURNAL, so a call in another process is visible too."""
    path = os.environ.get("TOOLS_JOURNAL")
    if path:
        with Path(path).open("a", encoding="utf-8") as f:
            f.write(line + "\n")


def scale(service: str, replicas: int, cluster: str = "dev") -> str:
    """Scale a service to a number of replicas.

    Args:
        service: Service name.
        replicas: How many replicas to run.
        cluster: Where it runs.
    """
    CALLS.append(("scale", {"service": service, "replicas": replicas, "cluster": cluster}))
    _journal(f"scale {service} {replicas} {cluster}")
    return f"scaled {service} to {replicas} on {cluster}"


async def deploy(version: str, when: dt.date | None = None) -> dict[str, object]:
    """Deploy a version (async tool returning structured output)."""
    CALLS.append(("deploy", {"version": version, "when": when}))
    _journal(f"deploy {version}")
    return {"deployed": version, "on": str(when) if when else None}


async def hang(seconds: float = 30.0) -> str:
    """Never finishes in time."""
    CALLS.append(("hang", {"seconds": seconds}))
    await asyncio.sleep(seconds)
    return "woke up"


def chatty(size: int = 10_000) -> str:
    """Returns far too much text."""
    CALLS.append(("chatty", {"size": size}))
    return "y" * size


def explode(message: str = "boom") -> str:
    """Always fails."""
    CALLS.append(("explode", {"message": message}))
    raise RuntimeError(message)


def slow_write(marker: str) -> str:
    """Writes the journal line, then (with ``$TOOLS_HANG`` set) hangs, so a process
    killed mid-call leaves the side effect done but the call unfinished."""
    import time

    CALLS.append(("slow_write", {"marker": marker}))
    _journal(f"slow_write {Path(marker).name}")
    if os.environ.get("TOOLS_HANG"):
        Path(marker).write_text("in the tool")
        time.sleep(3600)
    return "written"


not_callable = 42


def scale_within(service: str, replicas: Annotated[int, Field(ge=1, le=20)],
                 cluster: str = "dev") -> str:
    """Scale a service to between 1 and 20 replicas (for "Edit and approve" tests).

    Args:
        service: Service name.
        replicas: How many replicas to run.
        cluster: Where it runs.
    """
    CALLS.append(("scale", {"service": service, "replicas": replicas, "cluster": cluster}))
    return f"scaled {service} to {replicas} on {cluster}"
