"""``askhuman serve --workers N`` as gunicorn forked workers running uvicorn.

uvicorn's own workers spawn fresh interpreters: each imported its SDKs again, so N
workers with Feishu held N copies of lark-oapi (~160 MB each). Here gunicorn's arbiter
(``preload_app``) imports, once, everything a worker's app will need for this config
(``preload``: the engine, SQLAlchemy and the database driver, starlette, slack-bolt,
lark-oapi), freezes that heap (``gc.freeze``, so the workers' collectors never write
to those pages), and only then forks the workers: the pages stay shared until a worker
writes to them. Each worker runs uvicorn (``uvicorn_worker``) and builds its own app
after the fork (``Worker.load_wsgi`` calls the factory): database engines and
connections, the SQLite writer lock's file, event loops, threads and HTTP clients are
created in the worker, never inherited. The arbiter holds none of them: it migrated
the database and disposed of it before importing anything, it closes the event loop
lark-oapi makes at import, and gunicorn's control socket (a thread with its own event
loop in the arbiter) is off.

The process manager is gunicorn's: it binds the port once, restarts a worker that
dies, replaces them on SIGHUP (each new one re-reads the config), stops them
gracefully on SIGTERM (exit code 0), and halts if a worker cannot boot.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.glogging import Logger
from starlette.applications import Starlette
from uvicorn_worker import UvicornWorker

from bot.engine import heap
from bot.settings import Settings
from bot.shutdown import exit_zero_on_stop_signals

Factory = Callable[[Settings | None], Starlette]
"""A worker's app from the config file, or (it no longer loads) the settings given."""

GRACEFUL_SECONDS = 30
"""How long the arbiter waits for a worker's graceful stop (uvicorn's 15 s for open
connections, then the lifespan's shutdown) before it kills it."""


def preload(settings: Settings, env: Mapping[str, str]) -> list[str]:
    """Import what a worker's app will import for this config, without building
    anything (no engine, connection, client, thread or loop); returns the modules.

    Mirrors ``serve_cmd.PLATFORM_STARTERS``: a platform's SDK only if it is configured
    (as the starters decide), the database dialect and its driver (SQLAlchemy imports
    them when the worker creates its engine). The embedded agent runtime (pydantic-ai,
    ~800 modules) when agents are configured: every worker that runs or resumes one
    imports it on that first use (~0.9 s of CPU, ~30 MB each); imported here, the
    workers share its pages and their first answers do not wait for it. A single
    ``serve`` still imports it only on an agent's first run (``bot.agents``)."""
    from sqlalchemy.engine import make_url

    from bot.platforms.feishu.config import feishu_wanted
    from bot.platforms.slack.config import SlackConfig

    modules = ["bot.commands.serve_cmd", "bot.api.starter", "storage", "bot.web"]
    slack_required = any(route.slack is not None for route in settings.routes.values())
    if SlackConfig.from_env(env, required=slack_required) is not None:
        modules.append("bot.platforms.slack.runtime")
    if feishu_wanted(settings, env):
        modules.append("bot.platforms.feishu.platform")
    if settings.metrics.enabled:
        modules.append("bot.metrics")
    if settings.agents:
        modules.append("bot.agents.local")
    for module in modules:
        importlib.import_module(module)
    make_url(settings.database_url).get_dialect().import_dbapi()
    _close_import_time_loop()
    return modules


def _close_import_time_loop() -> None:
    """lark-oapi makes an event loop when it is imported (``lark_oapi.ws.client.loop``,
    also set as the main thread's loop): its epoll and self-pipe descriptors would be
    shared by every worker. Nothing runs on it (the long connection replaces it with
    a loop of its own, ``feishu/ws.py``), so the parent closes it before forking."""
    client = sys.modules.get("lark_oapi.ws.client")
    loop = getattr(client, "loop", None)
    if isinstance(loop, asyncio.AbstractEventLoop) and not (
            loop.is_running() or loop.is_closed()):
        loop.close()
        asyncio.set_event_loop(None)


def check_platforms(settings: Settings, env: Mapping[str, str]) -> None:
    """Read the platforms' environment as their starters will: ``SlackConfigError`` or
    ``FeishuConfigError`` naming the variable, in the parent, before anything forks."""
    from bot.platforms.feishu.config import FeishuConfig, feishu_wanted
    from bot.platforms.slack.config import SlackConfig

    slack_required = any(route.slack is not None for route in settings.routes.values())
    SlackConfig.from_env(env, required=slack_required)
    if feishu_wanted(settings, env):
        FeishuConfig.from_env(env)


class Logs(Logger):  # type: ignore[misc]
    """gunicorn's own messages (workers booted, died, replaced) go to the root logger,
    askhuman's structured lines, instead of gunicorn's plain-text handlers."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)  # errorlog and accesslog are None: it adds no handler
        self.error_log.propagate = True


class Worker(UvicornWorker):  # type: ignore[misc]
    """uvicorn in a forked worker, serving the app it builds after the fork."""

    CONFIG_KWARGS: dict[str, Any] = {"loop": "auto", "http": "auto", "ws": "none",
                                     "timeout_graceful_shutdown": 15}
    """As ``serve`` runs uvicorn in one process; ``worker_class`` sets the choices."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in ("uvicorn.error", "uvicorn.access"):  # back to the root logger
            logger = logging.getLogger(name)
            logger.handlers, logger.propagate = [], True
            logger.setLevel(logging.NOTSET)

    def load_wsgi(self) -> None:
        """Build this worker's app: the arbiter preloaded the factory (and the modules
        it needs); everything it creates belongs to this process."""
        factory: Factory = self.app.wsgi()
        self.wsgi = factory(self.app.started_with)

    def run(self) -> None:
        """uvicorn re-raises SIGTERM after its graceful shutdown: exit 0 instead."""
        with exit_zero_on_stop_signals():
            super().run()


class Arbiter(BaseApplication):  # type: ignore[misc]
    """gunicorn's arbiter for ``workers`` forked workers on ``host:port``."""

    def __init__(self, factory: Factory, settings: Settings, env: Mapping[str, str],
                 options: dict[str, Any]) -> None:
        self._factory, self.started_with, self._env, self._options = (
            factory, settings, env, options)
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._options.items():
            self.cfg.set(key, value)

    def load(self) -> Factory:
        """In the arbiter, before the first fork (``preload_app``): import, collect,
        freeze. The collector stays off while importing, so the imports leave no
        freed holes among the pages the workers will share."""
        gc.disable()
        try:
            preload(self.started_with, self._env)
        finally:
            heap.freeze_before_fork()
            gc.enable()
        return self._factory


UVICORN_KEYS = ("http", "loop", "ws", "timeout_graceful_shutdown")
"""What a forked worker's uvicorn takes from ``http_stack.uvicorn_options``."""


def worker_class(uvicorn: Mapping[str, Any]) -> type[Worker]:
    """``Worker`` serving with ``uvicorn``'s parser, loop and shutdown settings, as one
    ``serve`` would (gunicorn makes each worker from this class, in the arbiter)."""
    kwargs = {**Worker.CONFIG_KWARGS, **{key: uvicorn[key] for key in UVICORN_KEYS}}
    return type("Worker", (Worker,), {"CONFIG_KWARGS": kwargs, "__module__": __name__})


ChildExit = Callable[[Any, Any], None]
"""gunicorn's ``child_exit(arbiter, worker)`` hook, run in the arbiter."""


def options(*, host: str, port: int, workers: int, uvicorn: Mapping[str, Any],
            child_exit: ChildExit | None = None) -> dict[str, Any]:
    """gunicorn's settings for ``serve --workers N``; ``uvicorn`` as for one ``serve``;
    ``child_exit`` (the metrics directory's) when a worker has ended."""
    log_level = str(uvicorn["log_level"])
    hooks = {"child_exit": child_exit} if child_exit is not None else {}
    return {**hooks,
        "bind": [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"],
        "workers": workers,
        "worker_class": worker_class(uvicorn),
        "preload_app": True,
        "graceful_timeout": GRACEFUL_SECONDS,
        "keepalive": 5,  # uvicorn's default, as in one process
        "loglevel": log_level.lower(),
        "logger_class": f"{__name__}.Logs",
        "errorlog": None,
        "accesslog": None,
        "control_socket_disable": True,  # its thread and loop would cross later forks
        "proc_name": "askhuman",
    }


def serve(factory: Factory, settings: Settings, env: Mapping[str, str], *,
          host: str, port: int, workers: int, uvicorn: Mapping[str, Any],
          child_exit: ChildExit | None = None) -> None:
    """Run gunicorn's arbiter with ``workers`` forked uvicorn workers until SIGTERM."""
    Arbiter(factory, settings, env, options(host=host, port=port, workers=workers,
                                            uvicorn=uvicorn, child_exit=child_exit)).run()
