"""Shared set-up for tool-approval tests through the platform harnesses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter
from sqlalchemy import select

from bot.agents import AgentSpec, LocalRuntime
from bot.agents.base import AgentRuntime
from bot.settings import Settings
from bot.tools.config import ToolSettings
from storage import AuditLog, Database, HumanRequest, Run
from tests.tools.scripts import Scripted

SCALE_TOOL: dict[str, Any] = {
    "python": "tests.tools.sample_tools:scale",
    "fixed": {"cluster": "prod-eu"},
    "approval": {"when": "args.replicas > 3"},
}
TOOLS = TypeAdapter(list[ToolSettings])


def with_ops_agent(settings: Settings, tools: list[dict[str, Any]], route: str) -> Settings:
    """``settings`` plus an ``ops`` agent with ``tools`` on ``route``."""
    raw = settings.model_dump(mode="json", exclude={"source"})
    starters = next((a.get("starters") for a in raw["agents"].values() if a.get("starters")),
                    None)  # whoever may start the suite's other agents may start ``ops``
    raw["agents"]["ops"] = {"model": "scripted:deploy", "route": route, "tools": tools,
                            "starters": starters}
    return Settings.model_validate(raw)


def scripted_runtimes(settings: Settings, script: Scripted) -> Callable[[str], AgentRuntime]:
    """Every agent named ``ops`` runs ``script``; the others run as configured."""
    from bot.engine import registry_runtimes

    default = registry_runtimes(settings)

    def build(name: str) -> AgentRuntime:
        if name != "ops":
            return default(name)
        agent = settings.agents[name]
        spec = AgentSpec(name=name, model=agent.model, ask_human=agent.ask_human,
                         tools=tuple(agent.tools))
        return LocalRuntime(spec, model=script.model)

    return build


def audit_rows(db: Database) -> list[tuple[str, str, dict[str, Any], str | None]]:
    with db.transaction() as session:
        return [(a.event, a.outcome, dict(a.details or {}), a.reason)
                for a in session.scalars(select(AuditLog).order_by(AuditLog.id))]


def events(db: Database) -> list[str]:
    return [row[0] for row in audit_rows(db)]


def requests(db: Database) -> list[HumanRequest]:
    with db.transaction() as session:
        rows = list(session.scalars(select(HumanRequest).order_by(HumanRequest.id)))
        for row in rows:
            session.expunge(row)
        return rows


def runs(db: Database) -> list[Run]:
    with db.transaction() as session:
        rows = list(session.scalars(select(Run)))
        for row in rows:
            session.expunge(row)
        return rows
