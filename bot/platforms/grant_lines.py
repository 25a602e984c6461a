"""The engine's active grants → the lines a chat list shows (``renderers.grants``).

Shared by Slack (``/askhuman grants``, App Home) and Feishu (``grants``): each grant's
expiry is shown in its route's time zone (the route's ``timezone``, as its cards
are), else in ``fallback_zone`` (the reader's own, where the platform knows it), else
UTC. A route removed from the config since the grant was made keeps the fallback.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.engine.results import GrantView
from bot.settings import Settings
from renderers.grants import GrantLine


def grant_lines(grants: Sequence[GrantView], settings: Settings,
                fallback_zone: str | None = None) -> list[GrantLine]:
    """One ``GrantLine`` per grant, in the engine's order (newest first)."""
    lines = []
    for grant in grants:
        route = settings.routes.get(grant.route)
        zone = route.timezone if route is not None and route.timezone else fallback_zone
        lines.append(GrantLine(
            id=grant.id, label=grant.label, route=grant.route, agent=grant.agent,
            tool=grant.tool, scope=grant.scope, args=grant.args,
            granted_by=grant.granted_by, expires_at=grant.expires_at,
            max_uses=grant.max_uses, uses=grant.uses, timezone=zone))
    return lines
