"""One object that owns everything Slack needs at run time, and its starter for serve.

``SlackPlatform`` builds the client (with retries), the adapter and directory the
engine uses, and the Bolt app. ``serve`` asks it for HTTP endpoints (HTTP mode) or
runs its Socket Mode connection as a background task (Socket Mode).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeGuard

from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient
from starlette.requests import Request
from starlette.responses import Response

from bot.engine.home_signals import HomeSignals
from bot.engine.ports import Directory, PlatformAdapter
from bot.platforms.slack.adapter import SlackAdapter
from bot.platforms.slack.app import EVENTS_PATH, build_app, http_endpoint
from bot.platforms.slack.client import make_client
from bot.platforms.slack.config import SlackConfig
from bot.platforms.slack.directory import SlackDirectory
from bot.platforms.slack.engine_api import SlackEngine
from bot.platforms.slack.fast_clicks import FastClicks
from bot.platforms.slack.home import HomeEngine, HomeTab
from bot.platforms.slack.listeners.actions import AcksFirst, ActionListener
from renderers.words import Said

log = logging.getLogger(__name__)

Endpoint = Callable[[Request], Awaitable[Response]]


class AdapterRegistry(Protocol):
    """The engine's registration hook (``Engine.register_adapter``)."""

    def register_adapter(
        self, adapter: PlatformAdapter, directory: Directory | None = None
    ) -> None: ...


class SlackPlatform:
    """Slack wired to one engine: adapter + directory out, Bolt app in."""

    name = "slack"

    def __init__(
        self,
        config: SlackConfig,
        engine: SlackEngine,
        *,
        client: AsyncWebClient | None = None,
        directory_ttl: float = 60.0,
    ) -> None:
        self.config = config
        self.client = client or make_client(config)
        signals = getattr(engine, "home_signals", None)
        signals = signals if isinstance(signals, HomeSignals) else None
        self.home = (HomeTab(engine, self.client, signals=signals) if _has_home(engine)
                     else None)
        on_change = None if self.home is None else (
            signals.changed if signals is not None else self.home.changed)
        self.adapter = SlackAdapter(self.client, on_change=on_change,
                                    on_home_notice=self._home_notice if self.home else None)
        self.directory = SlackDirectory(self.client, ttl_seconds=directory_ttl)
        self.acks_first = AcksFirst()
        clicks = ActionListener(engine, home=self.home, acks_first=self.acks_first)
        self.fast_clicks = None if config.socket_mode else FastClicks(clicks, self.client)
        """Plain card clicks over HTTP, past Bolt (``bot.platforms.slack.fast_clicks``)."""
        self.app: AsyncApp = build_app(
            engine,
            self.client,
            signing_secret=None if config.socket_mode else config.signing_secret,
            directory=self.directory,
            home=self.home,
            acks_first=self.acks_first,
            clicks=clicks,
            fast=self.fast_clicks,
        )
        self._socket_handler: Any = None

    async def _home_notice(self, user_id: str, words: Said) -> None:
        """Tell someone who clicked on App Home, on their Home (``tell_clicker``)."""
        if self.home is not None:
            await self.home.publish(user_id, notice=words, force=True)

    def register(self, engine: AdapterRegistry) -> None:
        """Let the engine deliver through Slack and authorize with Slack membership."""
        engine.register_adapter(self.adapter, self.directory)

    def endpoints(self) -> list[tuple[str, Endpoint]]:
        """HTTP endpoints to mount; none in Socket Mode (Slack connects no URL to us)."""
        if self.config.socket_mode or self.config.signing_secret is None:
            return []
        return [(EVENTS_PATH, http_endpoint(self.app, self.config.signing_secret,
                                            self.acks_first, self.fast_clicks))]

    async def run_socket_mode(self, stop: asyncio.Event) -> None:
        """Hold a Socket Mode connection open until ``stop`` is set (auto-reconnects)."""
        from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

        assert self.config.app_token is not None
        handler = AsyncSocketModeHandler(self.app, self.config.app_token, web_client=self.client)
        self._socket_handler = handler
        try:  # the handler holds an aiohttp session from here on, connected or not
            await handler.connect_async()  # type: ignore[no-untyped-call]
            log.info("slack socket mode connected", extra={"platform": "slack"})
            await stop.wait()
        finally:
            await handler.close_async()  # type: ignore[no-untyped-call]
            log.info("slack socket mode closed", extra={"platform": "slack"})

    async def aclose(self) -> None:
        """Close the Web API client's pooled connections (at shutdown, after draining)."""
        close = getattr(self.client, "aclose", None)
        if close is not None:
            await close()

    def background_tasks(self) -> list[Callable[[asyncio.Event], Awaitable[None]]]:
        """Long-running coroutines ``serve`` must run next to uvicorn."""
        return [self.run_socket_mode] if self.config.socket_mode else []


def _has_home(engine: object) -> TypeGuard[HomeEngine]:
    """App Home needs the engine's ``runs_started_by`` (stand-ins in tests may lack it)."""
    return callable(getattr(engine, "runs_started_by", None))


def from_env(
    engine: SlackEngine, env: Mapping[str, str] | None = None, *, required: bool = False
) -> SlackPlatform | None:
    """The platform from ``SLACK_*`` variables, or None when Slack is not configured."""
    config = SlackConfig.from_env(env, required=required)
    if config is None:
        return None
    return SlackPlatform(config, engine)
