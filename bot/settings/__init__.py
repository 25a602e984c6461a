"""Admin configuration: agents, routes, approvers, timeouts and the database URL.

Only this file (never the model's arguments) decides who receives a request, who may
answer it and when it times out. It is a YAML file validated with pydantic (unknown
keys are errors) plus environment variables (``ASKHUMAN_DATABASE_URL`` overrides
the file's ``database_url``). Secrets such as bot tokens never live here: they come
from the environment and are read by the platform adapters.

Example (see ``askhuman.example.yaml`` for a complete one)::

    database_url: sqlite:///askhuman.db
    agents:
      deploy:
        model: scripted:deploy
        route: ops
    routes:
      ops:
        timeout: 30m
        slack:
          channel: C0123456789
          approvers: {groups: [S0123456789], channel_members: true}

One module per part of the file; imports point one way only, from the leaves to
loading, so a section can be read (and tested) without the rest:

- ``base`` (the strict model, ``KeyPathError``) and ``durations`` (``"30m"``, ``"50%"``);
- the sections: ``routes``, ``rules``, ``agents`` (uses ``routes``), ``tools`` (uses
  ``agents``), ``api``, ``operations`` (http, worker, metrics, retention), ``people``
  (people, admins), ``schedules``;
- ``file`` (the YAML file's shape and the checks across sections) and ``effective``
  (``Settings``, what the engine runs with);
- ``load`` (read, validate, apply the environment, report ``ConfigError``).

Import from ``bot.settings``: every public name is re-exported here.
"""

from __future__ import annotations

from bot.settings.agents import AgentSettings, Starters, config_warnings
from bot.settings.api import ApiClientLimits, ApiSettings
from bot.settings.base import KeyPathError
from bot.settings.durations import (
    DURATION_HINT,
    SPAN_HINT,
    Percent,
    Span,
    describe_span,
    format_duration,
    parse_duration,
    parse_span,
    span_seconds,
)
from bot.settings.effective import DEFAULT_DATABASE_URL, Settings
from bot.settings.file import FileSettings
from bot.settings.load import (
    BUILTIN_DEFAULT,
    CONFIG_ENV_VAR,
    CONSOLE_DEMO_USER,
    ConfigError,
    EnvSettings,
    _parse,
    load_file,
    load_settings,
)
from bot.settings.operations import (
    HttpSettings,
    MetricsSettings,
    RetentionSettings,
    WorkerSettings,
)
from bot.settings.people import AdminSettings, PersonSettings
from bot.settings.routes import (
    Approvers,
    ConsoleRoute,
    EscalationSettings,
    FeishuRoute,
    GrantSettings,
    OnTimeout,
    RouteSettings,
    SignOff,
    SlackRoute,
    check_action_ids,
)
from bot.settings.rules import RoutingRule
from bot.settings.schedules import ScheduleSettings

__all__ = [
    "BUILTIN_DEFAULT",
    "CONFIG_ENV_VAR",
    "CONSOLE_DEMO_USER",
    "DEFAULT_DATABASE_URL",
    "DURATION_HINT",
    "SPAN_HINT",
    "AdminSettings",
    "AgentSettings",
    "ApiClientLimits",
    "ApiSettings",
    "Approvers",
    "ConfigError",
    "ConsoleRoute",
    "EnvSettings",
    "EscalationSettings",
    "FeishuRoute",
    "FileSettings",
    "GrantSettings",
    "HttpSettings",
    "KeyPathError",
    "MetricsSettings",
    "OnTimeout",
    "Percent",
    "PersonSettings",
    "RetentionSettings",
    "RouteSettings",
    "RoutingRule",
    "ScheduleSettings",
    "Settings",
    "SignOff",
    "SlackRoute",
    "Span",
    "Starters",
    "WorkerSettings",
    "_parse",
    "check_action_ids",
    "config_warnings",
    "describe_span",
    "format_duration",
    "load_file",
    "load_settings",
    "parse_duration",
    "parse_span",
    "span_seconds",
]
