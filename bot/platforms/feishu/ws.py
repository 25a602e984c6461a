"""The long connection (``lark.ws.Client``), isolated in its own thread and loop.

lark-oapi 1.7 keeps a module-level event loop captured at import and blocks in
``start()`` with ``run_until_complete``, which fails inside an already running loop
(our uvicorn/engine loop). So the client gets a dedicated daemon thread whose first
act is to install a fresh loop as ``lark_oapi.ws.client.loop``. Handlers run on that
thread and hand work to the main loop (see ``handlers/``). Only one long
connection per process is possible because the SDK's loop is a module global.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import lark_oapi as lark

from bot.platforms.feishu.config import FeishuConfig

log = logging.getLogger("askhuman.feishu.ws")


class LongConnection:
    """Runs ``lark.ws.Client(...).start()`` in a daemon thread."""

    def __init__(self, config: FeishuConfig, dispatcher: Any) -> None:
        self._config = config
        self._dispatcher = dispatcher
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the thread (idempotent)."""
        if self.running:
            return
        self._thread = threading.Thread(target=self._run, name="feishu-ws", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import lark_oapi.ws.client as ws_client

        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        replaced, ws_client.loop = ws_client.loop, loop  # the SDK reads it in start()
        if replaced is not loop and not replaced.is_running() and not replaced.is_closed():
            replaced.close()  # the one lark-oapi made at import, never used: its sockets
        self._loop = loop
        client = lark.ws.Client(
            self._config.app_id,
            self._config.app_secret,
            event_handler=self._dispatcher,
            domain=self._config.domain,
            auto_reconnect=True,
            log_level=lark.LogLevel.INFO,
        )
        log.info("feishu long connection starting", extra={"domain": self._config.domain})
        try:
            client.start()
        except Exception as exc:
            # Stopping the loop ends start() with RuntimeError; anything else is a failure.
            if not isinstance(exc, RuntimeError):
                log.exception("feishu long connection stopped")
        finally:
            _close_loop(loop)
            log.info("feishu long connection thread exiting")

    def stop(self) -> None:
        """Best effort: the SDK has no ``stop()``; stopping its loop ends ``start()``."""
        loop = self._loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(loop.stop)


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what the SDK left on its stopped loop (its connection's tasks), let them
    unwind, and close the loop: an unclosed loop leaks its self-pipe sockets."""
    try:
        pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    except Exception:
        log.warning("feishu long connection loop did not unwind cleanly", exc_info=True)
    finally:
        loop.close()
