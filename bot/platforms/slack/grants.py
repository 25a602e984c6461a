"""The standing grants a Slack user may revoke, as the ephemeral list shows them.

Used by ``/askhuman grants`` (``listeners.commands``) and by the Revoke button
(``listeners.grants``), which replaces the list with a fresh one that says, on top,
what the click did. The engine decides who sees what: ``active_grants`` returns only
the grants on routes the person may answer.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from bot.engine.health import DATABASE_DOWN, database_unreachable
from bot.engine.ports import Identity
from bot.engine.results import GrantView
from bot.platforms.grant_lines import grant_lines
from bot.settings import Settings
from renderers.grants import GrantLine
from renderers.slack.grants import grants_message
from renderers.words import Said, said

log = logging.getLogger(__name__)

GRANTS_FAILED = said("grants.failed")


class GrantsEngine(Protocol):
    """What listing grants needs from the engine."""

    @property
    def settings(self) -> Settings: ...

    async def active_grants(self, who: Identity) -> list[GrantView]: ...


async def visible_grants(engine: GrantsEngine, who: Identity,
                         zone: str | None = None) -> list[GrantLine]:
    """The grants ``who`` may see and revoke, ready to render (``zone``: the reader's
    time zone, for routes that set none)."""
    return grant_lines(await engine.active_grants(who), engine.settings, zone)


async def grants_reply(engine: GrantsEngine, who: Identity, locale: str | None,
                       zone: str | None, notice: str | None = None) -> dict[str, Any]:
    """The list message (``text`` and ``blocks``) for ``who``; when the grants cannot be
    read, a message that says so (with ``notice`` still on top: the click's outcome)."""
    try:
        return grants_message(await visible_grants(engine, who, zone), locale, notice)
    except Exception as exc:
        down = database_unreachable(exc)
        log.warning("listing standing grants failed", exc_info=not down,
                    extra={"platform": "slack", "error": type(exc).__name__})
        failed: Said = DATABASE_DOWN if down else GRANTS_FAILED
        text = failed.text(locale)
        return {"text": f"{notice}\n{text}" if notice else text}
