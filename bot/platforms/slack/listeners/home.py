"""``app_home_opened``: publish the person's App Home (``bot.platforms.slack.home``)."""

from __future__ import annotations

from typing import Any

from bot.platforms.slack.home import HomeTab


class HomeOpenedListener:
    """Publishes Home when its tab (not the Messages tab) is opened."""

    def __init__(self, home: HomeTab) -> None:
        self._home = home

    async def __call__(self, event: dict[str, Any]) -> None:
        user = event.get("user")
        if not user or event.get("tab", "home") != "home":
            return
        await self._home.opened(str(user))
