"""The YAML file's shape (``FileSettings``) and the checks that span its sections:
agents, rules, schedules and escalations name defined routes and agents."""

from __future__ import annotations

from pydantic import Field, model_validator

from bot.settings.agents import AgentSettings, check_starter_channels
from bot.settings.api import ApiSettings
from bot.settings.base import KeyPathError, _Strict
from bot.settings.operations import (
    HttpSettings,
    MetricsSettings,
    RetentionSettings,
    WorkerSettings,
)
from bot.settings.people import AdminSettings, PersonSettings, check_people
from bot.settings.routes import RouteSettings, check_action_ids
from bot.settings.rules import RoutingRule
from bot.settings.schedules import ScheduleSettings
from bot.settings.tools import check_tool_routes


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
        check_people(self.people)
        for name, agent in self.agents.items():
            if agent.route not in self.routes:
                known = ", ".join(sorted(self.routes)) or "none defined"
                raise ValueError(
                    f"agent '{name}' uses route '{agent.route}', which is not defined "
                    f"under routes (known routes: {known})"
                )
            check_starter_channels(name, agent, self.routes[agent.route])
            check_tool_routes(name, agent, self.routes)
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
