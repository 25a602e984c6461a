"""Fail a test that leaks an aiohttp session, connector or connection.

``pyproject.toml`` turns ``ResourceWarning`` and the warnings raised in ``__del__``
(``PytestUnraisableExceptionWarning``) into errors. aiohttp also reports an unclosed
session or connector through the event loop's exception handler, and a test that
silences warnings (``warnings.catch_warnings``) or sets its own handler would hide
the warning; this watches ``call_exception_handler`` on every loop, in every thread,
and fails the test in which such a message arrived.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

LEAK_PREFIXES = ("Unclosed client session", "Unclosed connector", "Unclosed connection")

_seen: list[str] = []
_lock = threading.Lock()
_installed = False


def install() -> None:
    """Wrap ``BaseEventLoop.call_exception_handler`` once (idempotent)."""
    global _installed
    if _installed:
        return
    original = asyncio.BaseEventLoop.call_exception_handler

    def watching(self: asyncio.BaseEventLoop, context: dict[str, Any]) -> None:
        message = str(context.get("message", ""))
        if message.startswith(LEAK_PREFIXES):
            leaked = context.get("client_session") or context.get("connector") or ""
            with _lock:
                _seen.append(f"{message} {leaked!r}".strip())
        original(self, context)

    asyncio.BaseEventLoop.call_exception_handler = watching  # type: ignore[method-assign]
    _installed = True


def count() -> int:
    """How many leak messages have arrived so far (a mark for ``since``)."""
    with _lock:
        return len(_seen)


def since(mark: int) -> list[str]:
    """The leak messages that arrived after ``count()`` returned ``mark``."""
    with _lock:
        return _seen[mark:]
