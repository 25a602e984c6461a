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
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.askhuman.config import AskHumanConfig

DEFAULT_DATABASE_URL = "sqlite:///askhuman.db"
CONFIG_ENV_VAR = "ASKHUMAN_CONFIG"
DURATION_HINT = 'write a duration like "30m", "2h" or "1d", or a number of seconds'
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: object) -> float:
    """Turn ``"30m"`` / ``"2h"`` / ``"1d"`` / ``90`` into seconds (> 0)."""
    if isinstance(value, bool):
        raise ValueError(DURATION_HINT)
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.match(value)):
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    else:
        raise ValueError(DURATION_HINT)
    if seconds <= 0:
        raise ValueError(f"must be positive; {DURATION_HINT}")
    return seconds


def format_duration(seconds: float) -> str:
    """``1800`` → ``"30m"`` (the shortest exact unit), for error messages."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


class KeyPathError(ValueError):
    """A problem with a nested key: ``key`` (e.g. ``"escalation.route"``) is appended to
    the location pydantic reports, so the message names the exact key to fix."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(message)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Approvers(_Strict):
    """Who may answer on one platform. All lists are OR-ed together."""

    users: list[str] = Field(default_factory=list)
    """Platform user ids (Slack U…, Feishu open_id or email, console user names)."""
    groups: list[str] = Field(default_factory=list)
    """Slack user groups (S…); Feishu has none."""
    channel_members: bool = False
    """Members of the channel/chat the card was delivered to may answer."""

    @property
    def anyone_listed(self) -> bool:
        return bool(self.users or self.groups or self.channel_members)


class SlackRoute(_Strict):
    channel: str | None = None
    users: list[str] = Field(default_factory=list)
    """Users who get the card as a DM."""
    approvers: Approvers = Field(default_factory=Approvers)

    @model_validator(mode="after")
    def _has_recipient(self) -> SlackRoute:
        if not self.channel and not self.users:
            raise ValueError("set a channel and/or users to deliver to")
        return self


class FeishuRoute(_Strict):
    chat_id: str | None = None
    users: list[str] = Field(default_factory=list)
    """open_ids (ou_…) or emails that get the card as a direct message."""
    approvers: Approvers = Field(default_factory=Approvers)

    @model_validator(mode="after")
    def _has_recipient(self) -> FeishuRoute:
        if not self.chat_id and not self.users:
            raise ValueError("set a chat_id and/or users to deliver to")
        return self


class ConsoleRoute(_Strict):
    enabled: bool = True
    approvers: Approvers = Field(default_factory=Approvers)
    """Empty means: anyone at the local terminal may answer."""


class EscalationSettings(_Strict):
    """Still pending ``after`` its creation: also deliver the request to ``route``."""

    after: float = Field(description="seconds after the request was created")
    route: str
    """Another route: its recipients get the same card, its approvers may answer too."""

    @field_validator("after", mode="before")
    @classmethod
    def _after(cls, v: object) -> float:
        return parse_duration(v)


class RouteSettings(_Strict):
    """Where a request goes, who may answer, and how long it waits."""

    timeout: float = Field(default=86400.0, description="seconds")
    quorum: int = Field(default=1, ge=1)
    allow_self_approval: bool = False
    reminder: float | None = Field(default=None, description="seconds between reminders")
    """Remind the recipients (in the card's thread) every ``reminder`` while pending."""
    max_reminders: int = Field(default=3, ge=1)
    escalation: EscalationSettings | None = None
    """Also deliver to another route's recipients and approvers when still pending
    ``escalation.after`` the request was created (once; the deadline stays ``timeout``)."""
    slack: SlackRoute | None = None
    feishu: FeishuRoute | None = None
    console: ConsoleRoute | None = None

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout(cls, v: object) -> float:
        return parse_duration(v)

    @field_validator("reminder", mode="before")
    @classmethod
    def _reminder(cls, v: object) -> float | None:
        return None if v is None else parse_duration(v)

    @model_validator(mode="after")
    def _somewhere_to_go(self) -> RouteSettings:
        if not (self.slack or self.feishu or (self.console and self.console.enabled)):
            raise ValueError("a route needs at least one of: slack, feishu, console")
        for name in ("slack", "feishu"):
            section = getattr(self, name)
            if section is not None and not section.approvers.anyone_listed:
                raise ValueError(
                    f"{name}.approvers lists nobody; add users, groups or "
                    "channel_members: true"
                )
        timeout = format_duration(self.timeout)
        if self.reminder is not None and self.reminder >= self.timeout:
            raise KeyPathError(
                "reminder",
                f"must be shorter than timeout ({format_duration(self.reminder)} is not "
                f"shorter than {timeout}); lower reminder or raise timeout",
            )
        if self.escalation is not None and self.escalation.after >= self.timeout:
            raise KeyPathError(
                "escalation.after",
                f"must be shorter than timeout ({format_duration(self.escalation.after)} is "
                f"not shorter than {timeout}); lower escalation.after or raise timeout",
            )
        return self

    def platforms(self) -> list[str]:
        """Platforms this route delivers to, in a stable order."""
        out = [name for name in ("slack", "feishu") if getattr(self, name) is not None]
        if self.console is not None and self.console.enabled:
            out.append("console")
        return out

    def approvers_for(self, platform: str) -> Approvers | None:
        section = getattr(self, platform, None) if platform in self.platforms() else None
        return section.approvers if section is not None else None


class AgentSettings(_Strict):
    """One agent: its model, instructions, guardrails and route."""

    model: str
    instructions: str = ""
    route: str = "default"
    ask_human: AskHumanConfig = Field(default_factory=AskHumanConfig)


class ApiClientLimits(_Strict):
    """Per-client overrides under ``api.clients.<name>`` (the client itself is created
    with ``askhuman api-key create``; its key never appears in this file)."""

    ask_human: AskHumanConfig | None = None
    """Guardrails for this client's requests (default: ``api.ask_human``)."""


class ApiSettings(_Strict):
    """The HTTP API and MCP server (``/api/v1``, ``/mcp``, ``askhuman mcp``)."""

    callback_hosts: list[str] = Field(default_factory=list)
    """Hosts webhooks may go to: names (``hooks.example.com``), ``host:port`` or CIDR
    ranges (``10.1.0.0/16``). Private, loopback, link-local and metadata addresses are
    refused unless an entry lists the address or a range containing it."""
    ask_human: AskHumanConfig = Field(default_factory=AskHumanConfig)
    """Guardrails for API/MCP requests, as for an agent (Dify's defaults)."""
    clients: dict[str, ApiClientLimits] = Field(default_factory=dict)
    rate_limit: int = Field(default=120, ge=1)
    """Default requests per minute per client and replica (``--rate-limit`` overrides)."""
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    mcp_progress_seconds: float = Field(default=15.0, gt=0)
    """How often an MCP ``ask_human`` call reports progress while it waits."""
    local_answers: bool = True
    """MCP ``ask_human`` may also offer the form to the MCP client's user (elicitation)."""

    @field_validator("callback_hosts")
    @classmethod
    def _hosts(cls, v: list[str]) -> list[str]:
        from ipaddress import ip_network

        for entry in v:
            text = entry.strip()
            if not text or "://" in text or any(c in text for c in "@ ?#"):
                raise ValueError(f"'{entry}' is not a host name, host:port or CIDR range "
                                 "(write hooks.example.com, hooks.example.com:8443 or "
                                 "10.0.0.0/8, without a scheme or path)")
            if "/" in text:
                try:
                    ip_network(text, strict=False)
                except ValueError:
                    raise ValueError(f"'{entry}' is not a valid CIDR range, e.g. "
                                     "10.0.0.0/8") from None
        return [entry.strip().lower() for entry in v]

    def limits_for(self, client: str) -> AskHumanConfig:
        override = self.clients.get(client)
        return override.ask_human if override and override.ask_human else self.ask_human


class ScheduleSettings(_Strict):
    """Start ``agent`` on ``prompt`` whenever ``cron`` fires (UTC), once across replicas."""

    cron: str
    agent: str
    prompt: str
    route: str | None = None
    """Where the final answer is posted (default: the agent's route)."""
    catch_up: bool = True
    """After downtime, fire once for the missed time(s) (the latest one)."""

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str) -> str:
        from croniter import croniter

        if not croniter.is_valid(v):
            raise ValueError('write a cron expression like "*/15 * * * *" (minute hour day '
                             'month weekday, UTC)')
        return v


class FileSettings(_Strict):
    """The YAML file's shape (also the built-in default)."""

    database_url: str | None = None
    agents: dict[str, AgentSettings] = Field(default_factory=dict)
    routes: dict[str, RouteSettings] = Field(default_factory=dict)
    api: ApiSettings = Field(default_factory=ApiSettings)
    schedules: dict[str, ScheduleSettings] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _routes_exist(self) -> FileSettings:
        for name, agent in self.agents.items():
            if agent.route not in self.routes:
                known = ", ".join(sorted(self.routes)) or "none defined"
                raise ValueError(
                    f"agent '{name}' uses route '{agent.route}', which is not defined "
                    f"under routes (known routes: {known})"
                )
        for name, route in self.routes.items():
            target = route.escalation.route if route.escalation else None
            if target is None:
                continue
            key = f"routes.{name}.escalation.route"
            if target == name:
                raise KeyPathError(key, "a route cannot escalate to itself; name another "
                                        "route (define one under routes, e.g. oncall)")
            if target not in self.routes:
                known = ", ".join(sorted(r for r in self.routes if r != name))
                fix = f"name one of: {known}" if known else f"define '{target}' under routes"
                raise KeyPathError(key, f"route '{target}' is not defined under routes; {fix}")
        self._check_schedules()
        return self

    def _check_schedules(self) -> None:
        """Schedules name configured agents and routes."""
        for name, schedule in self.schedules.items():
            if schedule.agent not in self.agents:
                known = ", ".join(sorted(self.agents)) or "none defined"
                raise KeyPathError(f"schedules.{name}.agent", f"agent '{schedule.agent}' is "
                                   f"not defined under agents (known agents: {known})")
            if schedule.route is not None and schedule.route not in self.routes:
                known = ", ".join(sorted(self.routes)) or "none defined"
                raise KeyPathError(f"schedules.{name}.route", f"route '{schedule.route}' is "
                                   f"not defined under routes (known routes: {known})")


class EnvSettings(BaseSettings):
    """Environment overrides (``ASKHUMAN_*``)."""

    model_config = SettingsConfigDict(env_prefix="ASKHUMAN_", extra="ignore")

    database_url: str | None = None


BUILTIN_DEFAULT: dict[str, Any] = {
    "agents": {
        "deploy": {
            "model": "scripted:deploy",
            "instructions": "You deploy services after a human approves.",
            "route": "default",
        }
    },
    "routes": {"default": {"timeout": "30m", "console": {"enabled": True}}},
}


class Settings(_Strict):
    """The effective configuration the engine runs with."""

    database_url: str = DEFAULT_DATABASE_URL
    agents: dict[str, AgentSettings]
    routes: dict[str, RouteSettings]
    api: ApiSettings = Field(default_factory=ApiSettings)
    schedules: dict[str, ScheduleSettings] = Field(default_factory=dict)
    source: str = "built-in default"

    def agent(self, name: str) -> AgentSettings | None:
        return self.agents.get(name)

    def route_for(self, agent: str) -> RouteSettings:
        return self.routes[self.agents[agent].route]


class ConfigError(ValueError):
    """The config file is invalid; ``str()`` lists every problem with its key path."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: " + "; ".join(problems))


def _location(loc: tuple[int | str, ...]) -> str:
    # pydantic puts validator names (e.g. "function-before[...]") in some paths.
    return ".".join(str(p) for p in loc if not str(p).startswith("function-")) or "(top level)"


def _describe(error: Any) -> str:
    loc = tuple(error["loc"])
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, KeyPathError):
        loc = (*loc, *cause.key.split("."))
    path = _location(loc)
    kind, msg = error["type"], str(error["msg"])
    if kind == "extra_forbidden":
        return f"{path}: unknown key; remove it or check its spelling"
    if kind == "missing":
        return f"{path}: required key is missing"
    msg = msg.removeprefix("Value error, ")
    return f"{path}: {msg}"


def _parse(data: Any, source: str) -> FileSettings:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(source, ["(top level): must be a mapping of keys to values"])
    try:
        return FileSettings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(source, [_describe(e) for e in exc.errors()]) from None


def load_file(path: str | Path) -> FileSettings:
    """Read and validate one YAML file; raise ``ConfigError`` naming each bad key."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(source, [f"cannot read the file: {exc.strerror}"]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(source, [f"not valid YAML: {exc}"]) from None
    return _parse(data, source)


def load_settings(path: str | Path | None = None) -> Settings:
    """The effective settings: ``path`` (or ``$ASKHUMAN_CONFIG``), else the built-in default.

    ``ASKHUMAN_DATABASE_URL`` always wins over the file's ``database_url``.
    """
    path = path or os.environ.get(CONFIG_ENV_VAR) or None
    if path is None:
        parsed, source = _parse(BUILTIN_DEFAULT, "built-in default"), "built-in default"
    else:
        parsed, source = load_file(path), str(path)
    env = EnvSettings()
    url = env.database_url or parsed.database_url or DEFAULT_DATABASE_URL
    return Settings(
        database_url=url, agents=parsed.agents, routes=parsed.routes, api=parsed.api,
        schedules=parsed.schedules, source=source,
    )
