"""Dedupe shared by every replica: Feishu may deliver an event to any of them, and
resends events it thinks were lost, so each event and message id is recorded once in
the engine's table (this process's own memory is ``ReplayGuard``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from bot.platforms.feishu.engine_api import EngineApi

log = logging.getLogger("askhuman.feishu.events")

PLATFORM = "feishu"


class SharedDedupe:
    """``engine.first_seen`` / ``first_seen_chain`` for Feishu, failing open."""

    def __init__(self, engine: EngineApi) -> None:
        self._engine = engine

    async def first_seen(self, key: str) -> bool:
        """``engine.first_seen`` for Feishu: True unless another replica (or this one)
        already recorded ``key``. Fails open: on a database error the event is handled
        (this process still remembers ids in memory; decisions are compare-and-set)."""
        try:
            return await self._engine.first_seen(PLATFORM, key)
        except Exception:
            log.exception("shared feishu dedupe failed; handling the event", extra={"key": key})
            return True

    async def first_seen_chain(self, keys: Sequence[str]) -> list[bool]:
        """``engine.first_seen_chain`` for Feishu (one transaction for several keys,
        stopping at the first repeat); fails open like ``first_seen``."""
        try:
            return await self._engine.first_seen_chain(PLATFORM, keys)
        except Exception:
            log.exception("shared feishu dedupe failed; handling the event",
                          extra={"key": ", ".join(keys)[:200]})
            return [True] * len(keys)
