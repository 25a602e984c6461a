"""Where a route's cards go on one platform: the recipients admin configuration lists."""

from __future__ import annotations

from bot.engine.ports import DeliveryTarget
from bot.settings import RouteSettings


def targets_for(route: RouteSettings, platform: str) -> list[DeliveryTarget]:
    """The recipients admin configuration lists for one platform of a route."""
    channels, users = route.recipients(platform)
    return [DeliveryTarget("channel", c) for c in channels] + [
        DeliveryTarget("user", u) for u in users
    ]
