"""What one askhuman process does: take events in, run the engine's loops, or both.

``askhuman serve`` is both by default (the single-process layout, unchanged).
``serve --no-background`` only takes events in (HTTP, Socket Mode, the Feishu long
connection, the API) and decides clicks inline; ``askhuman worker`` only runs the
loops (outbox, resumes, stored clicks and starts left behind, timeouts, reminders,
escalation, grant expiry, schedules, webhooks). So front ends and workers scale
apart: every loop claims its rows with a lease and a compare-and-set, which is what
already let replicas share one database.

Every role beats its ``instances`` row (``bot.engine.instances``), so a web process
killed mid-click has its stored clicks taken over by a worker within seconds.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from bot.settings import Settings


class Role(enum.Enum):
    """The parts of the job this process runs."""

    ALL = "all"
    """``askhuman serve``: events in, and the engine's loops."""
    WEB = "web"
    """``askhuman serve --no-background``: events in; the loops run in ``askhuman worker``."""
    WORKER = "worker"
    """``askhuman worker``: the loops only, and ``/healthz``, ``/readyz``."""

    @property
    def takes_events(self) -> bool:
        """Mounts the platform endpoints and the API, and opens inbound connections."""
        return self is not Role.WORKER

    @property
    def runs_loops(self) -> bool:
        """Runs the engine's loops and the schedule sweep."""
        return self is not Role.WEB


class ReceiverError(Exception):
    """Several processes would each open an inbound connection that must be one."""


def receivers(settings: Settings, env: Mapping[str, str]) -> list[str]:
    """The inbound connections this config opens (read from the settings and the
    environment only: no platform SDK is imported), each named with what chose it."""
    from bot.platforms.feishu.config import FeishuConfig, feishu_wanted
    from bot.platforms.slack.config import SlackConfig

    found = []
    slack_required = any(route.slack is not None for route in settings.routes.values())
    slack = SlackConfig.from_env(env, required=slack_required)
    if slack is not None and slack.socket_mode:
        found.append("Slack Socket Mode (SLACK_APP_TOKEN is set)")
    if feishu_wanted(settings, env) and FeishuConfig.from_env(env).mode == "ws":
        found.append("the Feishu long connection (FEISHU_MODE is ws, the default)")
    return found


def check_workers(workers: int, settings: Settings, env: Mapping[str, str]) -> None:
    """Refuse ``--workers`` above 1 with a Socket Mode or Feishu long connection:
    each worker process would open its own, and the events would be spread over
    processes nobody chose (Slack allows 10 connections per app). The error names the
    flag and the two fixes."""
    if workers <= 1:
        return
    found = receivers(settings, env)
    if found:
        raise ReceiverError(
            f"--workers {workers} cannot be used with {' and '.join(found)}: every worker "
            "would open its own connection. Either take events over HTTP (Slack: unset "
            "SLACK_APP_TOKEN and set the app's Request URL to /slack/events; Feishu: "
            "FEISHU_MODE=http) and keep --workers, or run `askhuman serve --workers 1` "
            "for the connection and scale the background work with `askhuman worker` "
            "processes beside it.")

