"""Assembly: config + API client + adapter + directory + handlers + one transport."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from bot.platforms.feishu.adapter import FeishuAdapter
from bot.platforms.feishu.client import FeishuApi
from bot.platforms.feishu.config import FeishuConfig, feishu_wanted
from bot.platforms.feishu.directory import FeishuDirectory
from bot.platforms.feishu.engine_api import EngineApi
from bot.platforms.feishu.handlers.dispatch import FeishuEventHandlers
from bot.platforms.feishu.http import make_endpoint
from bot.platforms.feishu.names import NameCache
from bot.platforms.feishu.replay import ReplayGuard
from bot.platforms.feishu.ws import LongConnection

log = logging.getLogger("askhuman.feishu")

HTTP_PATH = "/feishu/events"


class FeishuPlatform:
    """Everything Feishu needs at run time; build it with ``build_feishu_platform``.

    - ``adapter`` / ``directory``: registered with the engine by the builder.
    - ``http_route``: ``(path, endpoint)`` for ``bot.web.create_app`` (HTTP mode only).
    - ``start()`` / ``stop()``: call from the app's lifespan, on the main event loop.
    """

    def __init__(
        self,
        config: FeishuConfig,
        engine: EngineApi,
        api: FeishuApi | None = None,
        approver_entries: list[str] | None = None,
        default_locale: str = "en",
    ) -> None:
        self.config = config
        self.approver_entries = list(approver_entries or [])
        """Configured approvers (open_ids, emails, mobiles) resolved by ``start()``."""
        self.api = api or FeishuApi(config)
        self.adapter = FeishuAdapter(self.api, default_locale=default_locale)
        self.directory = FeishuDirectory(self.api)
        self.guard = ReplayGuard(window_seconds=config.replay_window_seconds)
        self.names = NameCache(self.api.user_name)
        """open_id → name (contact API, cached) for toasts and replies."""
        self.handlers = FeishuEventHandlers(
            engine, self.adapter, self.api, self.guard, reply_budget=config.reply_budget_seconds,
            names=self.names,
        )
        # On the WS path the SDK neither decrypts nor checks anything; keys stay unused.
        self.dispatcher = self.handlers.dispatcher(config.encrypt_key, config.verification_token)
        self.http_endpoint: Callable[[Request], Awaitable[Response]] = make_endpoint(
            self.dispatcher,
            self.adapter,
            self.guard,
            config.encrypt_key,
            self.handlers.bind_loop,
            verification_token=config.verification_token,
            answer_click=self.handlers.clicks.answer_click,
            first_seen=self.handlers.dedupe.first_seen,
            first_seen_chain=self.handlers.dedupe.first_seen_chain,
            audit=self.handlers.auditor.audit,
        )
        self._long_connection: LongConnection | None = None

    def endpoints(self) -> list[tuple[str, Callable[[Request], Awaitable[Response]]]]:
        """Routes for ``create_app``: ``/feishu/events`` in HTTP mode, none for ws."""
        return [(HTTP_PATH, self.http_endpoint)] if self.config.mode == "http" else []

    def background_tasks(
        self, *, receive: bool = True
    ) -> list[Callable[[asyncio.Event], Awaitable[None]]]:
        """One task for the server's lifespan: ``start()``, wait for shutdown, ``stop()``.
        ``receive=False`` (``askhuman worker``, which only sends) never opens the long
        connection."""

        async def run(stop: asyncio.Event) -> None:
            await self.start(receive=receive)
            try:
                await stop.wait()
            finally:
                await self.stop()

        return [run]

    async def start(self, *, receive: bool = True) -> None:
        """Bind to the running loop, resolve approvers, and open the long connection (ws;
        not when ``receive`` is False)."""
        self.handlers.bind_loop(asyncio.get_running_loop())
        if self.approver_entries:
            await self.directory.warm_up(self.approver_entries)
        if self.config.mode == "ws" and receive:
            self.start_long_connection()
        log.info("feishu platform started", extra={"mode": self.config.mode})

    def start_long_connection(self) -> None:
        """Open the long connection in its own thread (``start()`` calls this in ws mode)."""
        if self._long_connection is None:
            self._long_connection = LongConnection(self.config, self.dispatcher)
        self._long_connection.start()

    async def stop(self) -> None:
        """Finish in-flight callbacks and stop the long connection (best effort). The API
        client stays usable: the engine's drain may still patch cards (``aclose``)."""
        await self.handlers.drain(timeout=5.0)
        if self._long_connection is not None:
            self._long_connection.stop()

    async def aclose(self) -> None:
        """Close the API client's threads and pooled connections (``serve``'s shutdown,
        after ``stop()`` and the engine's drain, which may still patch cards)."""
        await self.api.aclose()

    def feed_ws_event(self, payload: bytes) -> Any:
        """Dispatch a raw event exactly as the long connection would (no checks)."""
        return self.dispatcher._do_without_validation(payload)


def feishu_approver_entries(settings: Any) -> list[str]:
    """Every Feishu approver and starter entry (emails are resolved at start-up)."""
    entries: list[str] = []
    for route in settings.routes.values():
        if route.feishu is not None:
            entries.extend(route.feishu.approvers.users)
    for agent in settings.agents.values():
        starters = agent.starters.feishu if agent.starters is not None else None
        if starters is not None:
            entries.extend(starters.users)
    return list(dict.fromkeys(entries))


def feishu_locale(settings: Any) -> str:
    """The locale of toasts for cards this process has not sent itself: the routes'
    locale when every Feishu route has the same one, else ``en``."""
    locales = {route.locale for route in settings.routes.values() if route.feishu is not None}
    return locales.pop() if len(locales) == 1 else "en"


def feishu_configured(settings: Any, env: Mapping[str, str]) -> bool:
    """Whether ``serve`` should run Feishu: credentials given, or a route needs it.

    A route that uses Feishu without ``FEISHU_APP_ID`` makes ``build_feishu_platform``
    raise ``FeishuConfigError`` naming the variable, which is what an admin needs.
    """
    return feishu_wanted(settings, env)


def build_feishu_platform(
    settings: Any,
    engine: EngineApi,
    env: Mapping[str, str] | None = None,
    config: FeishuConfig | None = None,
) -> FeishuPlatform:
    """Read ``FEISHU_*`` (or use ``config``), build the platform, register it with the engine.

    Raises ``FeishuConfigError`` naming the missing variable. ``settings`` is the
    engine's ``Settings``; it is only used to find approver entries for ``start()``.
    """
    platform = FeishuPlatform(
        config or FeishuConfig.from_env(env),
        engine,
        approver_entries=feishu_approver_entries(settings),
        default_locale=feishu_locale(settings),
    )
    engine.register_adapter(platform.adapter, platform.directory)
    log.info("feishu enabled", extra={"platform": "feishu", "mode": platform.config.mode})
    return platform
