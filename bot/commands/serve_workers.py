"""``askhuman serve --workers N``: N processes on one port, run by uvicorn's workers.

uvicorn binds the port once in its parent process and spawns N children that accept
on it; it restarts a child that dies and, on SIGHUP, replaces them one by one (each
re-reads the config), and on SIGTERM stops them gracefully. askhuman adds no process
manager of its own. Each child builds its whole app through ``app`` (the import-string
factory uvicorn calls), from what the parent left in the environment.

The parent checks what must hold before the children start: the config and its tools,
no inbound connection that must be one (``roles.check_workers``), no ``metrics.port``,
no in-memory SQLite. It migrates the database once, so the children need not race to.
Each child is an ordinary replica: every guarantee already held across replicas
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
from bot.commands.roles import ReceiverError, Role, check_metrics_port, check_workers
from bot.logs import configure_logging
from bot.reload import PID_FILE_ENV
from bot.settings import Settings, load_settings
from bot.settings.load import CONFIG_ENV_VAR

log = logging.getLogger("askhuman.serve")

ROLE_ENV = "ASKHUMAN_SERVE_ROLE"
PROCESSES_ENV = "ASKHUMAN_SERVE_PROCESSES"
LOG_LEVEL_ENV = "ASKHUMAN_SERVE_LOG_LEVEL"
FACTORY = "bot.commands.serve_workers:app"


def app() -> Starlette:
    """One worker's app (uvicorn calls this in each child): the settings the parent
    checked, the role and the number of processes it passed down."""
    from bot.commands.serve_cmd import prepare

    configure_logging(os.environ.get(LOG_LEVEL_ENV, "info"))
    otel.configure(os.environ)  # the parent checked it; each process exports its own spans
    settings = load_settings()
    return prepare(settings, role=Role(os.environ.get(ROLE_ENV, Role.ALL.value)),
                   processes=int(os.environ.get(PROCESSES_ENV, "1")), upgrade=False)


def check(workers: int, settings: Settings) -> None:
    """What makes ``--workers N`` unsafe with this config: ``ReceiverError`` naming it."""
    check_workers(workers, settings, os.environ)
    check_metrics_port(workers, settings)
    if workers > 1 and _in_memory(settings.database_url):
        raise ReceiverError(
            f"--workers {workers} cannot share an in-memory SQLite database_url "
            f"({settings.database_url}): each process would have its own. Set "
            "database_url to a file (sqlite:///askhuman.db) or PostgreSQL.")


def run(config: Path | None, settings: Settings, *, host: str, port: int, workers: int,
        role: Role, options: dict[str, Any]) -> None:
    """Migrate once, hand the children their settings through the environment, and
    let uvicorn run ``workers`` of them on ``host:port`` until SIGTERM."""
    import uvicorn

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
    uvicorn.run(FACTORY, factory=True, workers=workers, host=host, port=port, **options)


def _in_memory(url: str) -> bool:
    database = url.split("://", 1)[-1].lstrip("/").split("?", 1)[0]
    return url.startswith("sqlite") and (database in ("", ":memory:") or "mode=memory" in url)
