"""The effective configuration the engine runs with (``Settings``): the file's sections
plus the database URL and where they came from, and which agents and routes a reload
retired."""

from __future__ import annotations

from pydantic import Field, PrivateAttr

from bot.settings.agents import AgentSettings
from bot.settings.api import ApiSettings
from bot.settings.base import _Strict
from bot.settings.operations import (
    HttpSettings,
    MetricsSettings,
    RetentionSettings,
    WorkerSettings,
)
from bot.settings.people import AdminSettings, PersonSettings
from bot.settings.routes import RouteSettings
from bot.settings.rules import RoutingRule
from bot.settings.schedules import ScheduleSettings

DEFAULT_DATABASE_URL = "sqlite:///askhuman.db"


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
