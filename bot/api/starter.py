"""Wire the door into ``askhuman serve``: routes, webhooks, MCP, schedules, LISTEN.

``build_door`` registers the webhook sender with the engine and returns the routes
to mount (``/api/v1/…``, ``/mcp``) and the background tasks to run: the engine's ear
for other processes' decisions (``Engine.hear_others``: cross-process long-poll
wake-ups, PostgreSQL's NOTIFY or a shared SQLite file's data version) and the MCP
session manager where requests are taken in; the schedule sweep where the engine's
loops run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from starlette.routing import BaseRoute

from bot.api.auth import RateLimiter
from bot.api.callbacks import CallbackPolicy
from bot.api.keys import SecretBox, SecretKeyError, box_from_env
from bot.api.routes import ApiRoutes
from bot.api.service import Door
from bot.api.webhooks import HttpWebhookSender
from bot.engine.core import Engine
from bot.settings import Settings

log = logging.getLogger("askhuman.api")

Task = Callable[[asyncio.Event], Awaitable[None]]
SCHEDULE_INTERVAL_SECONDS = 10.0


@dataclass
class DoorRuntime:
    door: Door
    routes: list[BaseRoute] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list)
    loop_tasks: list[Task] = field(default_factory=list)


def build_door(
    engine: Engine, settings: Settings, env: Mapping[str, str],
    schedule_interval: float = SCHEDULE_INTERVAL_SECONDS,
) -> DoorRuntime:
    box: SecretBox | None
    try:
        box = box_from_env(env)
    except SecretKeyError as exc:
        box = None
        log.warning("webhooks are off: %s", exc)
    policy = CallbackPolicy(settings.api.callback_hosts)
    engine.register_webhook_sender(HttpWebhookSender(policy, box))
    door = Door(engine, settings, policy, webhooks_enabled=box is not None)
    limiter = RateLimiter(engine)
    runtime = DoorRuntime(door, ApiRoutes(door, limiter).routes())
    from bot.mcp.lazy import lazy_mcp_route  # the MCP SDK loads on the first /mcp call

    route, task = lazy_mcp_route(door, limiter)
    runtime.routes.append(route)
    runtime.tasks.append(task)
    runtime.tasks.append(engine.hear_others)  # long-polls hear other processes' decisions

    async def schedules(stop: asyncio.Event) -> None:
        await engine.schedule_forever(stop, schedule_interval)

    runtime.loop_tasks.append(schedules)
    return runtime
