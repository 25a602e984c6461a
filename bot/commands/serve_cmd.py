"""``askhuman serve``: the long-running bot process.

One process runs the engine's worker loop (resumes, timeouts), every configured
chat platform, and an ASGI app (``/healthz``, ``/readyz`` which asks the database, and
platform HTTP endpoints) under uvicorn. Platforms plug in through
``PLATFORM_STARTERS``: each starter looks at the
environment, registers its adapter with the engine and returns what must be
mounted or run, or None when that platform is not configured. Slack's starter is
here; Feishu appends its own.

``serve --no-background`` and ``askhuman worker`` split that process in two roles
(``roles.Role``: events in, or the loops); ``serve --workers N`` runs N such processes
on one port as gunicorn's forked uvicorn workers (``serve_workers``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer
from starlette.applications import Starlette
from starlette.routing import BaseRoute

from bot import otel
from bot.commands import http_stack, shared_metrics
from bot.commands.http_stack import HttpOption, LoopOption, Stack
from bot.commands.roles import Role
from bot.engine import heap
from bot.engine.core import Engine
from bot.engine.health import DatabaseProbe
from bot.logs import configure_logging
from bot.reload import install_sighup
from bot.settings import ConfigError, Settings, config_warnings, load_settings
from bot.shutdown import Shutdown, exit_zero_on_stop_signals, stop_tasks
from bot.web import Endpoint, create_app

log = logging.getLogger("askhuman.serve")

SQLITE_WAIT_RECHECK_SECONDS = 1.0
"""How often a long-poll re-reads its request when several processes share a SQLite
file (no LISTEN/NOTIFY): the bound on hearing of another process's decision."""
SQLITE_WATCH_SECONDS = 0.025
"""Several processes on one SQLite file: how often each checks for the others' commits
while the checks find work (``bot.engine.sqlite_watch``; four times less often after a
quiet second), so a web process's decision reaches the worker's resume loop, and
another process's long-polls, within 25–100 ms."""

BackgroundTask = Callable[[asyncio.Event], Awaitable[None]]
"""A coroutine that runs until the event is set (e.g. a Socket Mode connection)."""


@dataclass
class PlatformRuntime:
    """What a started platform needs from the server."""

    name: str
    endpoints: list[tuple[str, Endpoint]] = field(default_factory=list)
    tasks: list[BackgroundTask] = field(default_factory=list)
    routes: list[BaseRoute] = field(default_factory=list)
    """Routes mounted as they are (any method): the API's ``/api/v1/…`` and ``/mcp``."""
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """Run at shutdown after the engine drained (pooled HTTP connections)."""
    sender_tasks: list[BackgroundTask] = field(default_factory=list)
    """Run instead of ``tasks`` by a process that takes no events in (``askhuman
    worker``): what sending needs, without an inbound connection."""
    loop_tasks: list[BackgroundTask] = field(default_factory=list)
    """Run beside the engine's loops, wherever they run (the schedule sweep)."""


PlatformStarter = Callable[[Engine, Settings, Mapping[str, str]], PlatformRuntime | None]
"""``(engine, settings, env) -> runtime | None``; raise with a helpful message on bad config."""


def start_slack(
    engine: Engine, settings: Settings, env: Mapping[str, str]
) -> PlatformRuntime | None:
    """Slack in Socket Mode when ``SLACK_APP_TOKEN`` is set, else HTTP ``/slack/events``."""
    from bot.platforms.slack.config import SlackConfig

    required = any(route.slack is not None for route in settings.routes.values())
    if SlackConfig.from_env(env, required=required) is None:
        return None  # before importing slack-bolt: an unused SDK costs memory and startup
    from bot.platforms.slack.runtime import from_env

    platform = from_env(engine, env, required=required)
    if platform is None:
        return None
    platform.register(engine)
    mode = "socket mode" if platform.config.socket_mode else "http /slack/events"
    log.info("slack enabled", extra={"platform": "slack", "mode": mode})
    return PlatformRuntime("slack", platform.endpoints(), platform.background_tasks(),
                           closers=[platform.aclose])  # a worker only sends: no tasks


def start_feishu(
    engine: Engine, settings: Settings, env: Mapping[str, str]
) -> PlatformRuntime | None:
    """Feishu over the long connection (default) or HTTP /feishu/events (FEISHU_MODE=http)."""
    from bot.platforms.feishu.config import feishu_wanted

    if not feishu_wanted(settings, env):
        return None  # decided before importing lark-oapi (~3 s, ~100 MB)
    from bot.platforms.feishu.platform import build_feishu_platform

    platform = build_feishu_platform(settings, engine, env)  # registers adapter + directory
    log.info("feishu enabled", extra={"platform": "feishu", "mode": platform.config.mode})
    return PlatformRuntime("feishu", platform.endpoints(), platform.background_tasks(),
                           closers=[platform.aclose],
                           sender_tasks=platform.background_tasks(receive=False))


def start_door(
    engine: Engine, settings: Settings, env: Mapping[str, str]
) -> PlatformRuntime | None:
    """The HTTP API (``/api/v1``), ``/mcp``, webhooks and schedules (``bot.api.starter``)."""
    from bot.api.starter import build_door

    door = build_door(engine, settings, env)
    return PlatformRuntime("door", tasks=door.tasks, routes=door.routes,
                           loop_tasks=door.loop_tasks)


PLATFORM_STARTERS: list[PlatformStarter] = [start_slack, start_feishu, start_door]


def start_platforms(
    engine: Engine, settings: Settings, env: Mapping[str, str] | None = None
) -> list[PlatformRuntime]:
    """Run every starter; platforms that are not configured are skipped."""
    env = os.environ if env is None else env
    runtimes = [r for starter in PLATFORM_STARTERS if (r := starter(engine, settings, env))]
    if not [r for r in runtimes if r.name != "door"]:
        log.warning("no chat platform is configured; only the HTTP endpoints will run")
    return runtimes


def build_app(
    engine: Engine, runtimes: list[PlatformRuntime], *, owns_database: bool = False,
    role: Role = Role.ALL,
) -> Starlette:
    """The ASGI app; its lifespan runs what ``role`` asks of this process (the engine's
    loops, platform background tasks) and at shutdown closes everything they opened
    (``shutdown_steps``). With ``owns_database`` (``serve``) the database's connections
    are closed last. A worker mounts only ``/healthz``, ``/readyz`` (and ``/metrics``)."""

    metrics_routes, metrics_port = _metrics(engine)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        stop = asyncio.Event()
        uninstall_sighup = install_sighup(engine)
        tasks = [asyncio.create_task(engine.serve_forever(stop, loops=role.runs_loops),
                                     name="engine-worker")]
        if role is Role.WORKER:  # it exists to resume: no first resume waits for imports
            tasks.append(asyncio.create_task(engine.runtimes.warm(list(engine.settings.agents)),
                                             name="agents-warm"))
        if metrics_port is not None:
            tasks.append(asyncio.create_task(_until_stopped(metrics_port, stop),
                                             name="metrics-port"))
        for runtime in runtimes:
            tasks += [
                asyncio.create_task(_until_stopped(task, stop), name=f"{runtime.name}-background")
                for task in _role_tasks(runtime, role)
            ]
        try:
            yield
        finally:
            uninstall_sighup()
            stop.set()
            await shutdown_steps(engine, runtimes, tasks, owns_database=owns_database).run()

    taking = runtimes if role.takes_events else []
    endpoints = [endpoint for runtime in taking for endpoint in runtime.endpoints]
    extra = [route for runtime in taking for route in runtime.routes] + metrics_routes
    return create_app(endpoints, lifespan, extra, ready=DatabaseProbe(engine.db).check,
                      max_body_bytes=engine.settings.http.max_body_bytes)


def _role_tasks(runtime: PlatformRuntime, role: Role) -> list[BackgroundTask]:
    """A platform's tasks for this process: its receiving tasks, or (a worker) its
    sending ones; plus the loop tasks where the engine's loops run."""
    tasks = list(runtime.tasks if role.takes_events else runtime.sender_tasks)
    return tasks + (runtime.loop_tasks if role.runs_loops else [])


def shutdown_steps(
    engine: Engine, runtimes: list[PlatformRuntime], tasks: list[asyncio.Task[None]],
    *, owns_database: bool,
) -> Shutdown:
    """What ``serve`` closes, in order: its loops and connections (Socket Mode, the
    Feishu long connection, LISTEN), what the engine still sends, agent runtimes (MCP
    sessions and their subprocesses), each platform's HTTP clients, the database."""
    shutdown = Shutdown()
    shutdown.add("background tasks", lambda: stop_tasks(tasks, grace=10, cancel_wait=5))
    shutdown.add("engine drain", lambda: engine.drain(timeout=5))
    shutdown.add("agent runtimes", engine.close_runtimes)
    for runtime in runtimes:
        for number, close in enumerate(runtime.closers):
            shutdown.add(f"{runtime.name} clients {number}", close)
    if owns_database:
        shutdown.add("database", _dispose(engine))
    if otel.owned() is not None:
        shutdown.add("traces", otel.shutdown)  # flush the spans still queued
    return shutdown


def _dispose(engine: Engine) -> Callable[[], Awaitable[None]]:
    async def dispose() -> None:
        await asyncio.to_thread(engine.db.dispose)

    return dispose


def _metrics(engine: Engine) -> tuple[list[BaseRoute], BackgroundTask | None]:
    """``/metrics`` on the main app, or a task serving it on its own port
    (``metrics: {enabled: true, port: 9464}``); nothing when metrics are off."""
    settings = engine.settings.metrics
    if not settings.enabled:
        return [], None
    from starlette.routing import Route

    from bot import metrics

    registry = metrics.registry_for(engine.db)
    endpoint = metrics.endpoint(registry)
    if settings.port is None:
        return [Route("/metrics", endpoint, methods=["GET"])], None

    port = settings.port
    shared = shared_metrics.listener()  # serve --workers: the arbiter bound it

    async def serve_port(stop: asyncio.Event) -> None:
        import uvicorn

        app = Starlette(routes=[Route("/metrics", endpoint, methods=["GET"])])
        options = {**http_stack.uvicorn_options(), "lifespan": "off"}
        options.pop("loop")  # runs in the loop of the server it serves beside
        server = uvicorn.Server(uvicorn.Config(app, host=settings.host, port=port, **options))
        serving = asyncio.create_task(server.serve(sockets=[shared] if shared else None))
        await stop.wait()
        server.should_exit = True
        await serving

    return [], serve_port


async def _until_stopped(task: BackgroundTask, stop: asyncio.Event) -> None:
    await task(stop)


def prepare(
    settings: Settings, env: Mapping[str, str] | None = None, *, role: Role = Role.ALL,
    processes: int = 1, upgrade: bool = True,
) -> Starlette:
    """Create/upgrade the database, build the engine and platforms, return the app for
    ``role``. ``processes`` is how many ``serve`` processes share this database (with
    ``--workers``): on SQLite, which has no notifications, a long-poll then re-reads
    its request every second, since another process may decide it, and each process
    checks the file for the others' commits (``SQLITE_WATCH_SECONDS``)."""
    from storage import Database

    for warning in config_warnings(settings.agents):
        log.warning("config warning", extra={"warning": warning})
    database = Database(settings.database_url)
    if upgrade:
        database.upgrade()
    engine = Engine(database, settings)
    share_sqlite(engine, processes, role)
    runtimes = start_platforms(engine, settings, env)
    return build_app(engine, runtimes, owns_database=True, role=role)


def share_sqlite(engine: Engine, processes: int, role: Role) -> None:
    """On a SQLite file that other processes share (``--workers``, ``--no-background``
    or ``askhuman worker``), hear their commits (``Tuning.watch_interval``) and bound a
    long-poll's wait for them (``Tuning.wait_recheck``); one ``serve`` hears itself."""
    if engine.db.sqlite_file is not None and (processes > 1 or role is not Role.ALL):
        engine.tuning.wait_recheck = SQLITE_WAIT_RECHECK_SECONDS
        engine.tuning.watch_interval = SQLITE_WATCH_SECONDS
        engine.tuning.watch_resumes = role is Role.WORKER


def check_tool_settings(settings: Settings) -> None:
    """Refuse to start with a tool that cannot be built (bad import path, unknown
    ``fixed`` key, missing MCP program): ``ConfigError`` naming each key."""
    if not any(agent.tools for agent in settings.agents.values()):
        return
    from bot.tools.check import check_tools

    problems, notes = check_tools({name: a.tools for name, a in settings.agents.items()})
    for note in notes:
        log.warning("tool config note", extra={"note": note})
    if problems:
        raise ConfigError(settings.source, problems)


def register(app: typer.Typer) -> None:
    """Add ``askhuman serve`` and ``askhuman worker``."""

    @app.command("serve")
    def serve(
        config: Annotated[
            Path | None,
            typer.Option(help="Config file (default: $ASKHUMAN_CONFIG, else the built-in one)."),
        ] = None,
        host: Annotated[str, typer.Option(help="Address for the HTTP endpoints.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="Port for the HTTP endpoints.")] = 3000,
        log_level: Annotated[str, typer.Option(help="debug, info, warning or error.")] = "info",
        workers: Annotated[int, typer.Option(
            min=1, help="Processes serving the port (gunicorn's forked uvicorn workers, sharing "
                        "the SDKs' memory); each is a full "
                        "replica. Not with Socket Mode or the Feishu long connection.")] = 1,
        no_background: Annotated[bool, typer.Option(
            "--no-background", help="Take events in only; run the background work "
                                    "(outbox, resumes, sweeps) in `askhuman worker`.")] = False,
        http: HttpOption = "auto",
        loop: LoopOption = "auto",
    ) -> None:
        """Run the bot: Slack (Socket Mode if SLACK_APP_TOKEN is set, else HTTP
        /slack/events), other configured platforms, and the resume/timeout worker."""
        role = Role.WEB if no_background else Role.ALL
        _run(config, host, port, Stack(log_level, http, loop), role, workers)

    @app.command("worker")
    def worker(
        config: Annotated[
            Path | None,
            typer.Option(help="Config file (default: $ASKHUMAN_CONFIG, else the built-in one)."),
        ] = None,
        host: Annotated[str, typer.Option(help="Address for /healthz and /readyz.")]
        = "127.0.0.1",
        port: Annotated[int, typer.Option(help="Port for /healthz and /readyz.")] = 3001,
        log_level: Annotated[str, typer.Option(help="debug, info, warning or error.")] = "info",
        http: HttpOption = "auto",
        loop: LoopOption = "auto",
    ) -> None:
        """Run the background work only (outbox, resumes, stored clicks, timeouts,
        reminders, schedules, webhooks) beside `askhuman serve --no-background`
        processes on the same database; serves only /healthz and /readyz."""
        _run(config, host, port, Stack(log_level, http, loop), Role.WORKER, 1)


def _run(config: Path | None, host: str, port: int, stack: Stack, role: Role,
         workers: int) -> None:
    """Check the config, then serve ``role`` in this process or in ``workers``."""
    import uvicorn

    from bot.commands import serve_workers
    from bot.commands.roles import ReceiverError
    from bot.platforms.feishu import FeishuConfigError
    from bot.platforms.slack.config import SlackConfigError

    configure_logging(stack.log_level)
    try:  # OTEL_TRACES_EXPORTER & co.: traces (docs/tracing.md)
        if workers > 1:
            otel.check(os.environ)  # each forked worker builds its own provider
        else:
            otel.configure(os.environ)
    except otel.TracingConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        settings = load_settings(config)
        check_tool_settings(settings)
        if workers > 1:
            serve_workers.check(workers, settings)
        else:
            asgi = prepare(settings, role=role)
    except (ConfigError, SlackConfigError, FeishuConfigError, ReceiverError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if workers > 1:
        serve_workers.run(config, settings, host=host, port=port, workers=workers, role=role,
                          options=stack.options())
        return
    options = stack.options()
    log.info("serving", extra={"host": host, "port": port, "config": settings.source,
                               "role": role.value, "http": options["http"],
                               "loop": options["loop"]})
    heap.freeze_startup_heap()  # before the first burst of clicks, not in it
    with exit_zero_on_stop_signals():  # SIGTERM: graceful shutdown, then exit code 0
        uvicorn.run(asgi, host=host, port=port, **options)
