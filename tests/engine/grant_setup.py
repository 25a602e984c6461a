"""Set-up for standing-grant tests: an ``ops`` agent with a real pydantic-ai runtime
(``FunctionModel`` scripts) and the ``scale`` tool, on a route that allows grants."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from bot.agents import AgentSpec, LocalRuntime
from bot.engine import Engine, Identity, audit_chain
from bot.settings import FileSettings, Settings
from storage import AuditLog, Database, HumanRequest
from storage.grants import Grant
from tests.engine.helpers import ORIGIN, STARTER, FakeAdapter, FakeClock, FakeDirectory
from tests.tools.scripts import Scripted

ALICE = Identity("slack", "U_ALICE", "Alice")
BOB = Identity("slack", "U_BOB", "Bob")
GRANTS = {"max_duration": "8h", "max_uses": 50}


def grant_settings(db_url: str, *, grants: dict[str, Any] | None = GRANTS, quorum: int = 1,
                   scope: str | None = None) -> Settings:
    tool: dict[str, Any] = {"python": "tests.tools.sample_tools:scale", "approval": "always",
                            "fixed": {"cluster": "prod-eu"}}
    if scope is not None:
        tool["grant_scope"] = scope
    route: dict[str, Any] = {"timeout": "30m", "quorum": quorum, "slack": {
        "channel": "C_OPS", "approvers": {"users": ["U_ALICE", "U_BOB"]}}}
    if grants is not None:
        route["grants"] = grants
    parsed = FileSettings.model_validate({
        "agents": {"ops": {"model": "scripted:ops", "route": "ops",
                           "starters": {"slack": {"users": ["U_STARTER"]}}, "tools": [tool]}},
        "routes": {"ops": route},
    })
    return Settings(database_url=db_url, agents=parsed.agents, routes=parsed.routes)


class GrantWorld:
    """An engine whose ``ops`` agent calls ``scale`` with the arguments each run is given."""

    def __init__(self, db_url: str, **kw: Any) -> None:
        self.db = Database(db_url)
        self.db.upgrade()
        self.settings = grant_settings(db_url, **kw)
        self.script = Scripted([("scale", {"service": "web", "replicas": 5})])
        agent = self.settings.agents["ops"]
        self.runtime = LocalRuntime(
            AgentSpec(name="ops", model=agent.model, tools=tuple(agent.tools)),
            model=self.script.model)
        self.clock = FakeClock()
        self.engine = Engine(self.db, self.settings, lambda _name: self.runtime, self.clock)
        self.adapter = FakeAdapter()
        self.engine.register_adapter(self.adapter, FakeDirectory())

    async def call(self, **args: Any) -> str:
        """Start a run whose model calls ``scale(**args)``; returns the request's ref."""
        self.script.steps = ([("scale", args)],)
        run_id = await self.engine.start_run("ops", "scale it", STARTER, ORIGIN)
        await self.engine.drain()
        with self.db.transaction() as session:
            ref = session.scalars(select(HumanRequest.ref).where(
                HumanRequest.run_id == run_id)).one()
        return ref

    def request(self, ref: str) -> HumanRequest:
        with self.db.transaction() as session:
            row = session.scalars(select(HumanRequest).where(HumanRequest.ref == ref)).one()
            session.expunge(row)
            return row

    def carded(self, ref: str) -> bool:
        return any(card.ref == ref for card, _ in self.adapter.delivered)

    def grants(self) -> list[Grant]:
        with self.db.transaction() as session:
            rows = list(session.scalars(select(Grant).order_by(Grant.id)))
            for row in rows:
                session.expunge(row)
            return rows

    def events(self, name: str) -> list[dict[str, Any]]:
        with self.db.transaction() as session:
            return [dict(a.details or {}) for a in session.scalars(
                select(AuditLog).where(AuditLog.event == name).order_by(AuditLog.id))]

    def chain_ok(self) -> bool:
        with self.db.transaction() as session:
            audit_chain.seal(session, self.clock.now.replace(tzinfo=None), limit=100_000)
        with self.db.transaction() as session:
            return audit_chain.verify(session).ok


def grant_values(seconds: int = 3600, uses: int = 5) -> dict[str, Any]:
    return {"grant_duration": str(seconds), "grant_uses": str(uses)}
