"""Where a route's cards go on one platform: the recipients admin configuration lists."""

from __future__ import annotations

from bot.engine.ports import DeliveryTarget
from bot.settings import RouteSettings


def targets_for(route: RouteSettings, platform: str) -> list[DeliveryTarget]:
    """The recipients admin configuration lists for one platform of a route."""
    if platform == "slack" and route.slack is not None:
        channels = [route.slack.channel] if route.slack.channel else []
        users = route.slack.users
    elif platform == "feishu" and route.feishu is not None:
        channels = [route.feishu.chat_id] if route.feishu.chat_id else []
        users = route.feishu.users
    elif platform == "console":
        return [DeliveryTarget("channel", "console")]
    else:
        return []
    return [DeliveryTarget("channel", c) for c in channels] + [
        DeliveryTarget("user", u) for u in users
    ]
