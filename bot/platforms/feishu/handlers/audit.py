"""Refusals decided by the Feishu handlers, written to the engine's audit log."""

from __future__ import annotations

import logging

from pydantic import JsonValue

from bot.engine.ports import Identity
from bot.platforms.feishu.engine_api import EngineApi
from bot.platforms.feishu.handlers.loop import MainLoop

log = logging.getLogger("askhuman.feishu.events")

PLATFORM = "feishu"


class Auditor:
    """Audits refusals, on the main loop or (``audit_later``) from an SDK thread."""

    def __init__(self, engine: EngineApi, loop: MainLoop) -> None:
        self._engine = engine
        self._loop = loop

    async def audit(
        self, ref: str | None, who: Identity | None, reason: str, **details: JsonValue
    ) -> None:
        """Audit a refusal decided here (never raises). Only for authenticated requests:
        signature-checked HTTP callbacks, or the app's own long connection."""
        try:
            await self._engine.audit_refusal(ref, who, reason, {"platform": PLATFORM, **details})
        except Exception:
            log.exception("could not audit a feishu refusal", extra={"ref": (ref or "")[:64]})

    def audit_later(
        self, ref: str | None, who: Identity | None, reason: str, **details: JsonValue
    ) -> None:
        """From an SDK thread: audit on the main loop without delaying the reply."""
        self._loop.spawn(self.audit(ref, who, reason, **details))
