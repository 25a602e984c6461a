"""How askhuman's processes serve HTTP: uvicorn's settings, in one place.

``serve``, ``serve --workers``, ``worker``, the metrics port and the benchmarks'
baselines (``benchmarks/harness.py``) all take them from here, so a baseline is
served exactly like the app.

The HTTP parser and the event loop are uvicorn's ``standard`` pieces, httptools and
uvloop, where their wheels are installed: per request they cost a fraction of the CPU
of h11 and asyncio's pure-Python loop (``benchmarks/README.md``, issue 22, part 2).
Where a wheel is missing (a platform without one), ``auto`` falls back to h11 and
asyncio's own loop, which serve the same app; ``--http`` and ``--loop`` choose one
explicitly (``docs/operations.md``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Annotated, Any

import typer

HTTP_CHOICES = ("auto", "httptools", "h11")
LOOP_CHOICES = ("auto", "uvloop", "asyncio")

GRACEFUL_SHUTDOWN_SECONDS = 15
"""Long-polls and MCP streams must not hold a shutdown for minutes; callers retry
(requests are idempotent)."""


def installed(module: str) -> bool:
    """Whether ``module`` imports here (uvicorn imports it anyway when it is used)."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def http_parser(choice: str = "auto") -> str:
    """``httptools`` when installed (for ``auto``), else ``h11``."""
    if choice != "auto":
        return choice
    return "httptools" if installed("httptools") else "h11"


def event_loop(choice: str = "auto") -> str:
    """``uvloop`` when installed (for ``auto``), else ``asyncio``."""
    if choice != "auto":
        return choice
    return "uvloop" if installed("uvloop") else "asyncio"


def uvicorn_options(log_level: str = "info", *, http: str = "auto",
                    loop: str = "auto") -> dict[str, Any]:
    """What ``uvicorn.run`` gets besides the app, host and port.

    No route is a WebSocket: ``ws="none"`` keeps the websockets library out of the
    process (about 1 MB). askhuman configures logging itself (``log_config=None``)."""
    return {"http": http_parser(http), "loop": event_loop(loop), "ws": "none",
            "log_level": log_level.lower(), "log_config": None,
            "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_SECONDS}


@dataclass(frozen=True)
class Stack:
    """The command line's choices: log level, HTTP parser, event loop."""

    log_level: str = "info"
    http: str = "auto"
    loop: str = "auto"

    def options(self) -> dict[str, Any]:
        return uvicorn_options(self.log_level, http=self.http, loop=self.loop)


def _installed(option: str, choices: tuple[str, ...]) -> Any:
    """A check of an option's value: one of ``choices``, and a module it names
    explicitly can be imported, so a missing wheel is named at start, with the fix,
    not in uvicorn's traceback."""
    fallback = choices[-1]

    def check(value: str) -> str:
        if value not in choices:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(choices)}")
        if value not in ("auto", fallback) and not installed(value):
            raise typer.BadParameter(
                f"{value} is not installed: `pip install {value}`, or {option} auto "
                f"(which serves with {fallback} where {value} is missing)")
        return value

    return check


HttpOption = Annotated[str, typer.Option(
    "--http", callback=_installed("--http", HTTP_CHOICES),
    help="HTTP parser: auto (httptools when installed, else h11), httptools or h11.")]
LoopOption = Annotated[str, typer.Option(
    "--loop", callback=_installed("--loop", LOOP_CHOICES),
    help="Event loop: auto (uvloop when installed, else asyncio's own), uvloop or "
         "asyncio.")]
