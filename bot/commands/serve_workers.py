"""``askhuman serve --workers N``: N processes on one port, gunicorn's forked workers.

gunicorn's arbiter binds the port once, imports what every worker needs (lark-oapi,
slack-bolt, SQLAlchemy, the engine), freezes that heap, and forks N uvicorn workers
that share those pages (``forked_workers``); it restarts a worker that dies and, on
SIGHUP, replaces them (each new one re-reads the config), and on SIGTERM stops them
gracefully. askhuman adds no process manager of its own. Each worker builds its whole
app after the fork through ``app`` (the factory), from what the parent left in the
environment: nothing that holds a connection, a lock, a thread or a loop crosses a fork.

The parent checks what must hold before the workers start: the config and its tools,
the platforms' variables, no inbound connection that must be one
(``roles.check_workers``), no in-memory SQLite. It migrates the database once, and
disposes of it, so the workers need not race to; with metrics on, it makes the
directory every worker's metrics are summed from and binds ``metrics.port`` for them to
share (``shared_metrics``).
Each worker is an ordinary replica: every guarantee already held across replicas
sharing a database (claims with leases and heartbeats, compare-and-sets, one token
bucket per client), so it holds across workers.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from starlette.applications import Starlette

from bot import otel
from bot.commands import shared_metrics
from bot.commands.roles import ReceiverError, Role, check_workers
from bot.commands.shared_metrics import MetricsDirectory
from bot.logs import configure_logging
from bot.reload import PID_FILE_ENV
from bot.settings import ConfigError, Settings, load_settings
from bot.settings.load import CONFIG_ENV_VAR

log = logging.getLogger("askhuman.serve")

ROLE_ENV = "ASKHUMAN_SERVE_ROLE"
PROCESSES_ENV = "ASKHUMAN_SERVE_PROCESSES"
LOG_LEVEL_ENV = "ASKHUMAN_SERVE_LOG_LEVEL"


def app(started_with: Settings | None = None) -> Starlette:
    """One worker's app (each worker calls this after the fork): the config file read
    afresh (a worker started by SIGHUP picks up the new one), the role and the number
    of processes the parent passed down. A file that no longer loads is refused, as a
    reload is in one process: the worker logs why and keeps ``started_with`` (what the
    parent checked at start) rather than failing, which would stop the whole server."""
    from bot.commands.serve_cmd import prepare

    configure_logging(os.environ.get(LOG_LEVEL_ENV, "info"))
    otel.configure(os.environ)  # the parent checked it; each process exports its own spans
    try:
        settings = load_settings()
    except ConfigError as exc:
        if started_with is None:
            raise
        log.error("config reload refused; this worker keeps the config the server "
                  "started with", extra={"source": exc.source, "problems": exc.problems})
        settings = started_with
    return prepare(settings, role=Role(os.environ.get(ROLE_ENV, Role.ALL.value)),
                   processes=int(os.environ.get(PROCESSES_ENV, "1")), upgrade=False)


def check(workers: int, settings: Settings) -> None:
    """What makes ``--workers N`` unsafe or wrong with this config: ``ReceiverError``
    (or the platform's config error) naming it, before anything forks."""
    from bot.commands.forked_workers import check_platforms

    check_platforms(settings, os.environ)
    check_workers(workers, settings, os.environ)
    if workers > 1 and _in_memory(settings.database_url):
        raise ReceiverError(
            f"--workers {workers} cannot share an in-memory SQLite database_url "
            f"({settings.database_url}): each process would have its own. Set "
            "database_url to a file (sqlite:///askhuman.db) or PostgreSQL.")


def run(config: Path | None, settings: Settings, *, host: str, port: int, workers: int,
        role: Role, options: dict[str, Any]) -> None:
    """Migrate once, hand the workers their settings through the environment, and
    let gunicorn fork ``workers`` of them on ``host:port`` until SIGTERM; each serves
    with uvicorn's ``options`` (``http_stack.uvicorn_options``)."""
    from bot.commands import forked_workers
    from storage import Database

    database = Database(settings.database_url)
    try:
        database.upgrade()
    finally:
        database.dispose()
    if config is not None:
        os.environ[CONFIG_ENV_VAR] = str(config.resolve())
    os.environ[ROLE_ENV] = role.value
    os.environ[PROCESSES_ENV] = str(workers)
    os.environ[LOG_LEVEL_ENV] = options["log_level"]
    pid_file = os.environ.pop(PID_FILE_ENV, None)  # the parent's: SIGHUP restarts workers
    if pid_file:
        Path(pid_file).write_text(f"{os.getpid()}\n")
    log.info("serving with workers", extra={
        "host": host, "port": port, "workers": workers, "role": role.value,
        "config": settings.source, "http": options["http"], "loop": options["loop"]})
    directory = _metrics_directory(settings)
    try:
        forked_workers.serve(app, settings, os.environ, host=host, port=port,
                             workers=workers, uvicorn=options,
                             child_exit=directory.process_dead if directory else None)
    finally:
        if directory is not None:
            directory.close()


def _metrics_directory(settings: Settings) -> MetricsDirectory | None:
    """With metrics on, the arbiter's multiprocess directory, and this process (so
    every worker it forks) switched to writing its metrics there: whichever worker
    answers a scrape serves the sum of all of them. ``metrics.port`` is bound here,
    once, for the workers to share."""
    if not settings.metrics.enabled:
        return None
    from bot import metrics

    if settings.metrics.port is not None:
        shared_metrics.bind_port(settings.metrics.host, settings.metrics.port)
    directory = MetricsDirectory.open(os.environ)
    metrics.use_multiprocess(str(directory.path))
    return directory


def _in_memory(url: str) -> bool:
    database = url.split("://", 1)[-1].lstrip("/").split("?", 1)[0]
    return url.startswith("sqlite") and (database in ("", ":memory:") or "mode=memory" in url)
