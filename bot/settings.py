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
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.askhuman.config import AskHumanConfig
from bot.tools.config import ToolSettings

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
    allow_external: bool = False
    """Slack Connect: people from another organisation in a shared channel count as
    channel members (or group members) only when this is true. People listed by id
    under ``users`` are always allowed. Also applies to starting this route's agents."""

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


_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
SPAN_HINT = f'{DURATION_HINT}, or a percentage of the timeout like "50%"'


class Percent(_Strict):
    """A share of the request's timeout (``"50%"``): resolved per request, so it follows
    the deadline the request actually got."""

    percent: float = Field(gt=0, lt=100)

    def of(self, total: float) -> float:
        return total * self.percent / 100

    def __str__(self) -> str:
        return f"{self.percent:g}%"


Span = float | Percent
"""Seconds, or a percentage of the timeout."""


def parse_span(value: object) -> Span:
    """``"30m"`` / ``90`` → seconds; ``"50%"`` → ``Percent`` (strictly between 0 and 100)."""
    if isinstance(value, Percent):
        return value
    if isinstance(value, dict) and set(value) == {"percent"}:  # a dumped Percent
        return Percent.model_validate(value)
    if isinstance(value, str) and (match := _PERCENT.match(value)):
        percent = float(match.group(1))
        if not 0 < percent < 100:
            raise ValueError(f"a percentage must be between 0% and 100% (got {value.strip()})")
        return Percent(percent=percent)
    try:
        return parse_duration(value)
    except ValueError:
        raise ValueError(SPAN_HINT) from None


def span_seconds(span: Span, timeout: float) -> float:
    """``span`` in seconds for a request that waits ``timeout`` seconds."""
    return span.of(timeout) if isinstance(span, Percent) else float(span)


def describe_span(span: Span) -> str:
    return str(span) if isinstance(span, Percent) else format_duration(span)


class EscalationSettings(_Strict):
    """One step of an escalation chain: still pending ``after`` its creation (a duration
    or a percentage of the timeout), also deliver the request to ``route``."""

    after: Span = Field(description="seconds after the request was created, or a Percent")
    route: str
    """Another route: its recipients get the same card, its approvers may answer too."""

    @field_validator("after", mode="before")
    @classmethod
    def _after(cls, v: object) -> Span:
        return parse_span(v)


class OnTimeout(_Strict):
    """What else happens when a request times out (it is never approved)."""

    notify: str | None = None
    """A route whose channel (Slack ``channel`` / Feishu ``chat_id``) gets a notice, once."""


class SignOff(_Strict):
    """One group under a route's ``require``: someone from it must approve.

    ``{group: S0123456789}`` is a Slack user group; ``{users: [...]}`` lists Slack
    ``U…`` ids, Feishu open_ids or emails, console names, or names under ``people``.
    ``name`` is what the card shows (default: the group id, or "group N").
    """

    name: str | None = None
    group: str | None = None
    users: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_shape(self) -> SignOff:
        if bool(self.group) == bool(self.users):
            raise ValueError(
                "a sign-off group is either {group: S0123456789} (a Slack user group) or "
                "{users: [U0123456789, alice@example.com, ou_…]} (people on any platform), "
                "optionally with a name; set exactly one of group or users")
        if self.group is not None and not re.fullmatch(r"S[A-Za-z0-9_]+", self.group):
            raise KeyPathError("group", f"{self.group!r} is not a Slack user group id "
                               "(S0123456789); for Feishu or plain lists write users: [...]")
        return self


_ACTION_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_action_ids(v: list[str]) -> list[str]:
    """``require_reason`` entries are plain action ids (``ValueError`` says the fix)."""
    for entry in v:
        if not _ACTION_ID.match(entry):
            raise ValueError(
                f"{entry!r} is not an action id; list the ids of the actions that need "
                "a reason, exactly as agents send them, e.g. require_reason: [reject] "
                "(no patterns or wildcards)")
    return v


class RouteSettings(_Strict):
    """Where a request goes, who may answer, and how long it waits."""

    timeout: float = Field(default=86400.0, description="seconds")
    quorum: int = Field(default=1, ge=1)
    locale: Literal["en", "zh-CN"] = "en"
    """Language of the card chrome askhuman writes (model-written text is never
    translated)."""
    timezone: str | None = None
    """IANA time zone for dates on cards (``Asia/Shanghai``); None: UTC."""
    allow_self_approval: bool = False
    reminder: Span | None = Field(default=None, description="seconds between reminders")
    """Remind the recipients (in the card's thread) every ``reminder`` while pending
    (a duration, or a percentage of the timeout like ``25%``)."""
    max_reminders: int = Field(default=3, ge=1)
    escalation: list[EscalationSettings] | None = None
    """An escalation chain: each step also delivers to another route's recipients and
    approvers when still pending ``after`` the request was created (once per step; the
    deadline stays ``timeout``). A single mapping is a one-step chain."""
    on_timeout: OnTimeout | None = None
    """``{notify: <route>}``: post a notice to that route's channel when a request times
    out (a timeout never approves)."""
    slack: SlackRoute | None = None
    feishu: FeishuRoute | None = None
    console: ConsoleRoute | None = None
    veto: bool = True
    """With a quorum, a choice of any ``destructive`` action decides at once."""
    require: list[SignOff] = Field(default_factory=list)
    """Sign-off per group: one approver from each group must approve (a person in two
    groups counts for one of them)."""
    require_reason: list[str] = Field(default_factory=list)
    """Action ids (e.g. ``reject``) that need a reason; the card gets a Reason field."""

    @field_validator("require_reason")
    @classmethod
    def _action_ids(cls, v: list[str]) -> list[str]:
        return check_action_ids(v)

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout(cls, v: object) -> float:
        return parse_duration(v)

    @field_validator("reminder", mode="before")
    @classmethod
    def _reminder(cls, v: object) -> Span | None:
        return None if v is None else parse_span(v)

    @field_validator("escalation", mode="before")
    @classmethod
    def _chain(cls, v: object) -> object:
        return [v] if isinstance(v, dict) else v  # the one-step form of old configs

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, v: str | None) -> str | None:
        if v is None:
            return v
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {v!r}; write an IANA name like "
                             "Asia/Shanghai or Europe/Berlin") from None
        return v

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
        self.check_timing()
        self._check_policy()
        return self

    def check_timing(self) -> None:
        """Reminders and escalation steps fall within the timeout (``KeyPathError``)."""
        timeout = format_duration(self.timeout)
        if (self.reminder is not None and not isinstance(self.reminder, Percent)
                and self.reminder >= self.timeout):
            raise KeyPathError(
                "reminder",
                f"must be shorter than timeout ({format_duration(self.reminder)} is not "
                f"shorter than {timeout}); lower reminder or raise timeout",
            )
        self._check_chain(timeout)

    def _check_chain(self, timeout: str) -> None:
        """Each step comes before the timeout and after the step before it."""
        previous = 0.0
        for index, step in enumerate(self.escalation or []):
            key = "escalation.after" if len(self.escalation or []) == 1 else \
                f"escalation.{index}.after"
            at = span_seconds(step.after, self.timeout)
            if at >= self.timeout:
                raise KeyPathError(key, f"must be shorter than timeout "
                                   f"({describe_span(step.after)} is not shorter than "
                                   f"{timeout}); lower {key} or raise timeout")
            if at <= previous:
                raise KeyPathError(key, f"must come after the step before it "
                                   f"({describe_span(step.after)} is not later); list the "
                                   "steps in the order they happen")
            previous = at

    def _check_policy(self) -> None:
        """Rules that can never be met: a quorum larger than the people the route lists
        (when it lists only users), a Slack group on a route without Slack."""
        listed = {name: getattr(self, name).approvers for name in self.platforms()}
        open_ended = any(a.groups or a.channel_members for a in listed.values()) or (
            "console" in listed and not listed["console"].anyone_listed)
        if self.quorum > 1 and not open_ended:
            people = {(name, u) for name, a in listed.items() for u in a.users}
            people |= {("require", u) for r in self.require for u in r.users}
            if self.quorum > len(people):
                raise KeyPathError("quorum", f"needs {self.quorum} distinct approvers but the "
                                   f"route lists only {len(people)}; lower quorum or add "
                                   "approvers (users, groups or channel_members: true)")
        for index, signoff in enumerate(self.require):
            if signoff.group is not None and self.slack is None:
                raise KeyPathError(f"require.{index}.group", "Slack user groups need a slack "
                                   "section on this route; list users instead")

    def platforms(self) -> list[str]:
        """Platforms this route delivers to, in a stable order."""
        out = [name for name in ("slack", "feishu") if getattr(self, name) is not None]
        if self.console is not None and self.console.enabled:
            out.append("console")
        return out

    def approvers_for(self, platform: str) -> Approvers | None:
        section = getattr(self, platform, None) if platform in self.platforms() else None
        return section.approvers if section is not None else None


class RoutingRule(_Strict):
    """``rules:`` entry: requests for which ``when`` (CEL over ``agent``, ``tool`` and
    ``args``) is true go to ``route``, with the overrides given here."""

    when: str
    route: str
    quorum: int | None = Field(default=None, ge=1)
    """Distinct approvers needed (default: the route's)."""
    timeout: float | None = Field(default=None, description="seconds")
    """How long the request waits (default: the route's); percentages in the route's
    reminder and escalation follow it."""
    veto: bool | None = None
    """Whether a destructive choice decides at once (default: the route's)."""
    allow_self_approval: bool | None = None
    """Whether the run's starter may answer (default: the route's)."""
    require_reason: list[str] | None = None
    """Action ids that need a reason (default: the route's)."""

    @field_validator("when")
    @classmethod
    def _compiles(cls, v: str) -> str:
        from bot.tools.rules import validated

        return validated(v)

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout(cls, v: object) -> float | None:
        return None if v is None else parse_duration(v)

    def overrides(self) -> dict[str, Any]:
        """The route settings this rule changes."""
        fields = ("quorum", "timeout", "veto", "allow_self_approval", "require_reason")
        return {k: getattr(self, k) for k in fields if getattr(self, k) is not None}


class Starters(_Strict):
    """Who may start an agent from each chat platform (same shape as approvers).

    ``channel_members: true`` means the members of the channel (Slack ``channel``) or
    chat (Feishu ``chat_id``) the agent's route delivers its cards to. A platform
    without a section here cannot start the agent at all.
    """

    slack: Approvers | None = None
    feishu: Approvers | None = None
    console: Approvers | None = None
    """Console user names (``askhuman demo`` starts runs as ``demo-requester``)."""

    @model_validator(mode="after")
    def _each_lists_someone(self) -> Starters:
        for name in ("slack", "feishu", "console"):
            section = getattr(self, name)
            if section is not None and not section.anyone_listed:
                raise KeyPathError(name, "lists nobody; add users, groups or "
                                         "channel_members: true, or remove the section")
        if self.console is not None and (self.console.groups or self.console.channel_members):
            raise KeyPathError("console", "the console has no groups or channels; "
                                          "list console user names under users")
        if self.feishu is not None and self.feishu.groups:
            raise KeyPathError("feishu.groups", "Feishu has no user groups askhuman can use; "
                                                "list users or set channel_members: true")
        return self

    def for_platform(self, platform: str) -> Approvers | None:
        return getattr(self, platform, None) if platform in ("slack", "feishu", "console") \
            else None


class AgentSettings(_Strict):
    """One agent: its model, instructions, guardrails, route and who may start it."""

    model: str
    instructions: str = ""
    route: str = "default"
    ask_human: AskHumanConfig = Field(default_factory=AskHumanConfig)
    starters: Starters | None = None
    """Who may start this agent from Slack, Feishu or the console. Missing means
    nobody can (only trusted callers such as the API or schedules start it);
    ``askhuman config check`` warns about it."""
    tools: list[ToolSettings] = Field(default_factory=list)
    """Python and MCP tools the agent may call (see ``bot.tools.config``)."""


class HttpSettings(_Strict):
    """The HTTP server (``serve``): limits applied before any endpoint runs."""

    max_body_bytes: int = Field(default=1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    """Larger request bodies get 413 unread (Slack and Feishu send a few KB)."""


class WorkerSettings(_Strict):
    """The background worker of ``serve`` (resumes, timeouts, the outbox)."""

    resume_concurrency: int = Field(default=16, ge=1, le=64)
    """Resume jobs run at once per process, each under its own lease. Model calls are
    I/O, so several in parallel keep one slow model from holding up every other run,
    and under a burst their claims and outcomes share commits (group commit)."""


class RetentionSettings(_Strict):
    """How long what people and agents said is kept (unset: forever, as before).

    Applied by the worker's housekeeping sweep (every 10 minutes) and by
    ``askhuman db prune``. Who decided what and when always stays (until ``audit``).
    """

    answers: float | None = Field(default=None, description="seconds")
    """Remove the values people entered (results, votes, staged files, the
    ``decided`` audit details) this long after a request was decided."""
    transcripts: float | None = Field(default=None, description="seconds")
    """Clear the prompt, message history and output of a finished run (and its
    posted result text in the outbox) this long after it ended."""
    audit: float | None = Field(default=None, description="seconds")
    """Delete audit rows last seen longer ago than this."""

    @field_validator("answers", "transcripts", "audit", mode="before")
    @classmethod
    def _duration(cls, v: object) -> float | None:
        return None if v is None else parse_duration(v)


class ApiClientLimits(_Strict):
    """Per-client overrides under ``api.clients.<name>`` (the client itself is created
    with ``askhuman api-key create``; its key never appears in this file)."""

    ask_human: AskHumanConfig | None = None
    """Guardrails for this client's requests (default: ``api.ask_human``)."""


class AdminSettings(_Strict):
    """Who may use admin chat actions (withdraw any pending request), by platform user
    id (Slack ``U…``, Feishu ``ou_…``, console names)."""

    slack: list[str] = Field(default_factory=list)
    feishu: list[str] = Field(default_factory=list)
    console: list[str] = Field(default_factory=list)

    def includes(self, platform: str, user_id: str) -> bool:
        return user_id in (getattr(self, platform, None) or [])


class MetricsSettings(_Strict):
    """Prometheus ``/metrics`` (off by default)."""

    enabled: bool = False
    port: int | None = Field(default=None, ge=1, le=65535)
    """Serve ``/metrics`` on its own port instead of the main app's."""
    host: str = "127.0.0.1"
    """Address of the separate metrics port (``0.0.0.0`` for a scraper elsewhere)."""


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


class PersonSettings(_Strict):
    """One person's identities: ``{slack: U…, feishu: alice@… or ou_…, console: name}``."""

    slack: str | None = None
    feishu: str | None = None
    console: str | None = None

    @model_validator(mode="after")
    def _somewhere(self) -> PersonSettings:
        if not (self.slack or self.feishu or self.console):
            raise ValueError("list at least one identity, e.g. {slack: U0123456789, "
                             "feishu: alice@example.com}")
        return self

    def on(self, platform: str) -> str | None:
        return getattr(self, platform, None) if platform in ("slack", "feishu",
                                                              "console") else None


def _check_people(people: dict[str, PersonSettings]) -> None:
    """One identity belongs to one person."""
    seen: dict[tuple[str, str], str] = {}
    for name, person in people.items():
        for platform in ("slack", "feishu", "console"):
            ident = person.on(platform)
            if ident is None:
                continue
            other = seen.setdefault((platform, ident.lower()), name)
            if other != name:
                raise KeyPathError(f"people.{name}.{platform}", f"{ident} is already "
                                   f"people.{other}.{platform}; one identity is one person")


class FileSettings(_Strict):
    """The YAML file's shape (also the built-in default)."""

    database_url: str | None = None
    agents: dict[str, AgentSettings] = Field(default_factory=dict)
    routes: dict[str, RouteSettings] = Field(default_factory=dict)
    http: HttpSettings = Field(default_factory=HttpSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    admins: AdminSettings = Field(default_factory=AdminSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    schedules: dict[str, ScheduleSettings] = Field(default_factory=dict)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    people: dict[str, PersonSettings] = Field(default_factory=dict)
    """One person on several platforms votes once (``bot.engine.policy``)."""
    rules: list[RoutingRule] = Field(default_factory=list)
    """Routing rules as code: the first whose ``when`` is true picks the route (and
    overrides); none true: the agent's (or tool's, or API request's) route."""

    @model_validator(mode="after")
    def _routes_exist(self) -> FileSettings:
        _check_people(self.people)
        for name, agent in self.agents.items():
            if agent.route not in self.routes:
                known = ", ".join(sorted(self.routes)) or "none defined"
                raise ValueError(
                    f"agent '{name}' uses route '{agent.route}', which is not defined "
                    f"under routes (known routes: {known})"
                )
            _check_starter_channels(name, agent, self.routes[agent.route])
            _tool_routes_exist(name, agent, self.routes)
        for name, route in self.routes.items():
            self._check_route_links(name, route)
        self._check_schedules()
        for index, rule in enumerate(self.rules):
            self._known_route(f"rules.{index}.route", rule.route, None)
            self._check_rule_timeout(index, rule)
        return self

    def _check_rule_timeout(self, index: int, rule: RoutingRule) -> None:
        """A rule's overrides must make a valid route: its timeout must leave room for
        the route's reminder and escalation, its quorum must be reachable, its
        ``require_reason`` entries must be action ids."""
        overrides = rule.overrides()
        if not overrides:
            return
        if rule.require_reason is not None:
            try:
                check_action_ids(rule.require_reason)
            except ValueError as exc:
                raise KeyPathError(f"rules.{index}.require_reason", str(exc)) from None
        effective = self.routes[rule.route].model_copy(update=overrides)
        try:  # the route's own checks, with these overrides
            effective.check_timing()
            effective._check_policy()
        except KeyPathError as exc:
            field = exc.key if exc.key in overrides else (
                "timeout" if "timeout" in overrides else exc.key)
            raise KeyPathError(f"rules.{index}.{field}", f"is too short for "
                               f"routes.{rule.route}.{exc.key}: {exc}" if field == "timeout"
                               else f"is not valid for routes.{rule.route}: {exc}") from None

    def _check_route_links(self, name: str, route: RouteSettings) -> None:
        """Escalation steps and ``on_timeout.notify`` name other defined routes."""
        chain = route.escalation or []
        for index, step in enumerate(chain):
            at = "escalation" if len(chain) == 1 else f"escalation.{index}"
            key = f"routes.{name}.{at}.route"
            if step.route == name:
                raise KeyPathError(key, "a route cannot escalate to itself; name another "
                                        "route (define one under routes, e.g. oncall)")
            self._known_route(key, step.route, name)
        notify = route.on_timeout.notify if route.on_timeout else None
        if notify is not None:
            key = f"routes.{name}.on_timeout.notify"
            self._known_route(key, notify, None)
            target = self.routes[notify]
            if not ((target.slack and target.slack.channel)
                    or (target.feishu and target.feishu.chat_id)):
                raise KeyPathError(key, f"route '{notify}' has no slack.channel or "
                                        "feishu.chat_id to post the notice in; set one on "
                                        "that route or name another route")

    def _known_route(self, key: str, target: str, exclude: str | None) -> None:
        if target in self.routes:
            return
        known = ", ".join(sorted(r for r in self.routes if r != exclude))
        fix = f"name one of: {known}" if known else f"define '{target}' under routes"
        raise KeyPathError(key, f"route '{target}' is not defined under routes; {fix}")

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


def _check_starter_channels(name: str, agent: AgentSettings, route: RouteSettings) -> None:
    """``starters.<platform>.channel_members`` needs a channel on the agent's route."""
    if agent.starters is None:
        return
    for platform, field in (("slack", "channel"), ("feishu", "chat_id")):
        section = agent.starters.for_platform(platform)
        if section is None or not section.channel_members:
            continue
        delivery = getattr(route, platform)
        if delivery is None or not getattr(delivery, field):
            raise KeyPathError(
                f"agents.{name}.starters.{platform}.channel_members",
                f"route '{agent.route}' has no {platform}.{field} whose members could start "
                f"'{name}'; set routes.{agent.route}.{platform}.{field} or list users instead",
            )


def config_warnings(agents: dict[str, AgentSettings]) -> list[str]:
    """Valid but probably unintended settings, each naming the key and the fix."""
    return [
        f"agents.{name}.starters is missing, so nobody can start '{name}' from Slack, "
        f"Feishu or the console (only the API or schedules can). Add who may start it, "
        f"e.g. starters: {{slack: {{users: [U0123456789]}}}}"
        for name, agent in sorted(agents.items())
        if agent.starters is None
    ]
def _tool_routes_exist(
    agent_name: str, agent: AgentSettings, routes: dict[str, RouteSettings]
) -> None:
    """A tool's ``route:`` (where its approvals go) must name a defined route."""
    for index, tool in enumerate(agent.tools):
        if tool.route is not None and tool.route not in routes:
            known = ", ".join(sorted(routes)) or "none defined"
            raise KeyPathError(f"agents.{agent_name}.tools.{index}.route",
                               f"route '{tool.route}' is not defined under routes "
                               f"(known routes: {known})")


class EnvSettings(BaseSettings):
    """Environment overrides (``ASKHUMAN_*``)."""

    model_config = SettingsConfigDict(env_prefix="ASKHUMAN_", extra="ignore")

    database_url: str | None = None


CONSOLE_DEMO_USER = "demo-requester"
"""The console user ``askhuman demo`` starts runs as (a starter in the built-in config)."""

BUILTIN_DEFAULT: dict[str, Any] = {
    "agents": {
        "deploy": {
            "model": "scripted:deploy",
            "instructions": "You deploy services after a human approves.",
            "route": "default",
            "starters": {"console": {"users": [CONSOLE_DEMO_USER]}},
        }
    },
    "routes": {"default": {"timeout": "30m", "console": {"enabled": True}}},
}


class Settings(_Strict):
    """The effective configuration the engine runs with."""

    database_url: str = DEFAULT_DATABASE_URL
    agents: dict[str, AgentSettings]
    routes: dict[str, RouteSettings]
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    schedules: dict[str, ScheduleSettings] = Field(default_factory=dict)
    source: str = "built-in default"
    http: HttpSettings = Field(default_factory=HttpSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    admins: AdminSettings = Field(default_factory=AdminSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    people: dict[str, PersonSettings] = Field(default_factory=dict)
    rules: list[RoutingRule] = Field(default_factory=list)
    _retired_agents: frozenset[str] = PrivateAttr(default_factory=frozenset)
    _retired_routes: frozenset[str] = PrivateAttr(default_factory=frozenset)

    def agent(self, name: str) -> AgentSettings | None:
        """The agent ``name`` takes new runs as (None: unknown, or removed by a reload)."""
        return None if name in self._retired_agents else self.agents.get(name)

    def retiring(self, agents: frozenset[str], routes: frozenset[str]) -> Settings:
        """A copy where ``agents`` and ``routes`` (removed by a reload but kept so their
        open requests finish) are refused for new work (``bot.reload``)."""
        copy = self.model_copy()
        copy._retired_agents, copy._retired_routes = agents, routes
        return copy

    def retired_agent(self, name: str) -> bool:
        return name in self._retired_agents

    def retired_route(self, name: str) -> bool:
        return name in self._retired_routes

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
        database_url=url, agents=parsed.agents, routes=parsed.routes,
        retention=parsed.retention, source=source, http=parsed.http, api=parsed.api,
        metrics=parsed.metrics, admins=parsed.admins,
        schedules=parsed.schedules, worker=parsed.worker, people=parsed.people,
        rules=parsed.rules,
    )
