"""Live config reload: SIGHUP (or ``askhuman config reload``) re-reads the config.

A valid file is swapped in with one attribute assignment (``Engine.apply_settings``),
so every reader sees the old or the new config, never a mix. An invalid one is
refused: the running config stays, and the error is logged with each key path.
Each replica reloads on its own. Requests already open keep what they stored.
What is bound at start (the database URL, platform credentials, the HTTP server's
limits, metrics) still needs a restart; a reload that changes them says so.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from bot.settings import ConfigError, Settings, load_settings

log = logging.getLogger("askhuman.reload")
PID_FILE_ENV = "ASKHUMAN_PID_FILE"
RESTART_ONLY = ("database_url", "http", "metrics")


class Reloadable(Protocol):
    """What a reload swaps the config of (the engine)."""

    settings: Settings

    def apply_settings(self, settings: Settings) -> None: ...


def config_path(settings: Settings) -> Path | None:
    """The file the running config came from (None: built-in default or env only)."""
    path = Path(settings.source)
    return path if settings.source != "built-in default" and path.is_file() else None


def reload_into(engine: Reloadable, path: Path) -> bool:
    """Re-read ``path``; swap it in if valid. Returns whether it was applied."""
    try:
        fresh = load_settings(path)
    except ConfigError as exc:
        log.error("config reload refused; the running config stays",
                  extra={"source": exc.source, "problems": exc.problems})
        return False
    current = engine.settings
    stale = [key for key in RESTART_ONLY if getattr(fresh, key) != getattr(current, key)]
    if stale:
        log.warning("config reloaded; these settings take effect only after a restart",
                    extra={"keys": stale})
    kept = fresh.model_copy(update={key: getattr(current, key) for key in RESTART_ONLY})
    merged = with_retired(kept, current)
    engine.apply_settings(merged)
    log.info("config reloaded", extra={"source": str(path), "agents": len(fresh.agents),
                                       "routes": len(fresh.routes),
                                       "retired_agents": sorted(set(merged.agents)
                                                                - set(fresh.agents)),
                                       "retired_routes": sorted(set(merged.routes)
                                                                - set(fresh.routes))})
    return True


def with_retired(fresh: Settings, current: Settings) -> Settings:
    """``fresh`` plus the agents and routes it removed from ``current``, kept *retired*:
    refused for new work (runs, API requests) with a message saying so, while their
    open requests finish (decisions, timeouts, reminders and resumes still find their
    route and agent). A name the new file defines again is live again."""
    gone_agents = {n: a for n, a in current.agents.items() if n not in fresh.agents}
    gone_routes = {n: r for n, r in current.routes.items() if n not in fresh.routes}
    if not gone_agents and not gone_routes:
        return fresh
    merged = fresh.model_copy(update={"agents": {**gone_agents, **fresh.agents},
                                      "routes": {**gone_routes, **fresh.routes}})
    return merged.retiring(frozenset(gone_agents), frozenset(gone_routes))


def install_sighup(engine: Reloadable) -> Callable[[], None]:
    """Reload on SIGHUP while the app runs; returns the function that uninstalls it.
    Also writes the pid file named by ``ASKHUMAN_PID_FILE`` (for ``config reload``)."""
    path = config_path(engine.settings)
    pid_file = os.environ.get(PID_FILE_ENV)
    if pid_file:
        Path(pid_file).write_text(f"{os.getpid()}\n")
    if path is None or not hasattr(signal, "SIGHUP"):
        return lambda: None
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGHUP, reload_into, engine, path)
    except (NotImplementedError, RuntimeError):  # not the main thread / no signals
        log.warning("SIGHUP reload unavailable in this process")
        return lambda: None

    def uninstall() -> None:
        loop.remove_signal_handler(signal.SIGHUP)

    return uninstall
