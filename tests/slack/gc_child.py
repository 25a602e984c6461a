"""``askhuman serve`` exactly as the console script runs it, then a census of what it
left open (run as ``python -m``; not a test module).

    python -m tests.slack.gc_child serve --port PORT

A warning from ``__del__`` only comes when the garbage collector reaches the object,
and at interpreter exit Python does not reliably finalize objects held in reference
cycles (or still referenced), so a leak could go unnoticed. After ``serve`` returns
this collects garbage, then prints one ``Unclosed …`` line to stderr for each aiohttp
session or connector still open and each socket file descriptor the process still
holds: by then ``serve`` should have closed every one.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path


def open_sockets() -> list[str]:
    """The process's socket file descriptors (Linux ``/proc``), e.g. ``7 -> socket:[…]``."""
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # the directory's own descriptor, closed meanwhile
        if target.startswith("socket:"):
            found.append(f"{fd.name} -> {target}")
    return found


def census() -> list[str]:
    import aiohttp

    gc.collect()
    left = [f"Unclosed aiohttp object {o!r}" for o in gc.get_objects()
            if isinstance(o, aiohttp.ClientSession | aiohttp.BaseConnector) and not o.closed]
    return left + [f"Unclosed socket fd {s}" for s in open_sockets()]


if __name__ == "__main__":
    from bot.cli import main

    sys.argv[0] = "askhuman"
    try:
        main()
    finally:
        for line in census():
            print(line, file=sys.stderr)
