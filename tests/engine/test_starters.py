"""Who may start an agent: ``agents.<name>.starters``, checked by ``Engine.start_run``."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from bot.engine import DirectoryUnavailable, Identity, StartRefusedError, UnknownAgentError
from bot.engine.authz import UNVERIFIED
from bot.settings import Settings
from storage import AuditLog
from tests.engine.helpers import ORIGIN, STARTER, FakeDirectory, make_engine

STRANGER = Identity("slack", "U_NOBODY")


def _with_starters(engine: Any, starters: dict[str, Any] | None) -> None:
    """Give every agent ``starters`` (None: remove them)."""
    agents = {name: agent.model_copy(update={"starters": None}) for name, agent in
              engine.settings.agents.items()}
    if starters is not None:
        data = engine.settings.model_dump()
        for agent in data["agents"].values():
            agent["starters"] = starters
        agents = Settings.model_validate(data).agents
    engine.settings = engine.settings.model_copy(update={"agents": agents})


def _refusals(engine: Any) -> list[tuple[str | None, str | None, dict[str, Any]]]:
    with engine.db.transaction() as session:
        rows = session.scalars(select(AuditLog).where(AuditLog.event == "run_start_refused"))
        return [(r.actor_user, r.reason, dict(r.details)) for r in rows]


async def test_stranger_is_refused_audited_and_nothing_is_delivered(db_url: str) -> None:
    engine, adapter, _ = make_engine(db_url)
    with pytest.raises(StartRefusedError, match=r"not allowed to start 'deploy'.*"
                                                r"agents\.deploy\.starters\.slack"):
        await engine.start_run("deploy", "Deploy v1", STRANGER, ORIGIN)
    assert adapter.delivered == [] and await engine.job_states() == {}
    assert [(u, d) for u, _, d in _refusals(engine)] == [
        ("U_NOBODY", {"agent": "deploy", "check": "not_a_starter"})]
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)  # a listed starter
    assert len(adapter.delivered) == 1


async def test_unknown_agent_lists_only_what_the_asker_may_start(db_url: str) -> None:
    engine, _, _ = make_engine(db_url)
    with pytest.raises(UnknownAgentError, match=r"^Unknown agent 'nope'\. Agents you may "
                                                r"start: deploy, form\.$"):
        await engine.start_run("nope", "x", STARTER, ORIGIN)
    with pytest.raises(UnknownAgentError) as info:
        await engine.start_run("nope", "x", STRANGER, ORIGIN)
    assert "deploy" not in str(info.value) and "may not start any agent" in str(info.value)
    # Trusted callers (API, schedules) skip starters and see every configured agent.
    with pytest.raises(UnknownAgentError, match="Configured agents: deploy, form"):
        await engine.start_run("nope", "x", STRANGER, ORIGIN, check_starters=False)


async def test_agent_without_starters_is_started_only_by_trusted_callers(db_url: str) -> None:
    engine, adapter, _ = make_engine(db_url)
    _with_starters(engine, None)
    with pytest.raises(StartRefusedError):
        await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    assert await engine.startable_agents(STARTER) == []
    await engine.start_run("deploy", "Deploy v1", Identity("api", "key-1"), ORIGIN,
                           check_starters=False)
    assert len(adapter.delivered) == 1


async def test_groups_emails_and_other_platforms(db_url: str) -> None:
    directory = FakeDirectory(groups={"S_DEV": {"U_DEV"}}, emails={"ann@example.com": "U_ANN"})
    engine, _, _ = make_engine(db_url, directory=directory)
    _with_starters(engine, {"slack": {"users": ["ann@example.com"], "groups": ["S_DEV"]}})
    for user in ("U_DEV", "U_ANN"):
        assert await engine.start_refusal("deploy", Identity("slack", user)) is None
    assert await engine.start_refusal("deploy", Identity("slack", "U_OTHER")) is not None
    # A Slack id on another platform is not the same person.
    refusal = await engine.start_refusal("deploy", Identity("feishu", "U_DEV"))
    assert refusal is not None and "agents.deploy.starters.feishu" in str(refusal)


class FlakyDirectory(FakeDirectory):
    async def group_members(self, group_id: str) -> set[str]:
        raise DirectoryUnavailable(group_id)


async def test_failed_lookup_refuses_with_retry_message_unless_listed(db_url: str) -> None:
    engine, _, _ = make_engine(db_url, directory=FlakyDirectory())
    _with_starters(engine, {"slack": {"users": ["U_STARTER"], "groups": ["S_DEV"]}})
    assert await engine.start_refusal("deploy", Identity("slack", "U_DEV")) == UNVERIFIED
    assert await engine.start_refusal("deploy", STARTER) is None  # listed: no lookup needed
    assert await engine.startable_agents(Identity("slack", "U_DEV")) == []
