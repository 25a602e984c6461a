"""Secrets at rest: whatever a model provider or a platform echoes in an error (an
``sk-…`` key, a configured token) is scrubbed before it is stored, in every table."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from pydantic_ai.exceptions import ModelHTTPError
from sqlalchemy import select

from bot.engine import DeliveryError, DeliveryRef, DeliveryTarget, Engine, Origin, PostKey
from renderers.card import RequestCard
from storage import Base, HumanRequest
from tests.engine.helpers import ORIGIN, STARTER, FakeAdapter, FakeDirectory, alice, make_engine
from tests.engine.model_agents import model_runtime

PROVIDER_KEY = "sk-proj-4f9Qm2ZxLr8TnW1vYb7KcD3e"
CUSTOM_KEY = "acme-model-key-5566778899"  # not token-shaped: only known from the environment
FEISHU_SECRET = "feishu-app-secret-0f0f0f0f"
SECRETS = (PROVIDER_KEY, CUSTOM_KEY, FEISHU_SECRET)


def provider_error() -> ModelHTTPError:
    """What an OpenAI-compatible server answers to a bad key, echoing it back."""
    return ModelHTTPError(401, "gpt-test", {"error": {
        "message": f"Incorrect API key provided: {PROVIDER_KEY}; header Bearer {CUSTOM_KEY}",
        "detail": f"app secret {FEISHU_SECRET}"}})


@dataclass
class LeakyAdapter(FakeAdapter):
    """A platform whose errors carry the secrets too."""

    leak_post: bool = True

    async def deliver(self, card: RequestCard, target: DeliveryTarget,
                      key: PostKey | None = None) -> DeliveryRef:
        if target.id == "C_LEAK":
            raise DeliveryError(f"refused with token {PROVIDER_KEY} / {FEISHU_SECRET}")
        return await super().deliver(card, target, key)

    async def post_run_result(self, origin: Origin, text: str,
                              key: PostKey | None = None) -> None:
        if self.leak_post:
            self.leak_post = False
            raise ConnectionError(f"proxy said: bad key {CUSTOM_KEY}")
        await super().post_run_result(origin, text, key)


def dump(engine: Engine) -> str:
    """Every row of every table, as text."""
    with engine.db.transaction() as session:
        rows = [
            {column.name: getattr(row, column.key) for column in table.columns}
            for table in Base.metadata.sorted_tables
            for row in session.execute(select(table)).mappings()
        ]
    return json.dumps(rows, default=str)


@pytest.fixture(autouse=True)
def configured_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_API_KEY", CUSTOM_KEY)
    monkeypatch.setenv("FEISHU_APP_SECRET", FEISHU_SECRET)


async def test_model_errors_never_reach_the_database(db_url: str) -> None:
    async def broken(_messages: object) -> str:
        raise provider_error()

    engine, _, clock = make_engine(db_url, fake=model_runtime(broken), max_attempts=2)
    adapter = LeakyAdapter()
    engine.register_adapter(adapter, FakeDirectory())
    run_id = await engine.start_run("form", "ship", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    await engine.respond(ref, alice(), "approve", {})
    for _ in range(4):  # resume fails, is retried, gives up; the failure post is retried
        await engine.run_worker_once()
        clock.advance(600)
    engine.runtimes.built["form"] = model_runtime(broken, fail_first=provider_error())
    failed = await engine.start_run("form", "again", STARTER, ORIGIN)  # fails at once
    for _ in range(2):
        await engine.run_worker_once()
        clock.advance(600)

    stored = dump(engine)
    for secret in SECRETS:
        assert secret not in stored
    # ...while what happened is still there to read:
    assert "Incorrect API key provided: ***" in stored
    assert await engine.job_states() == {"failed": 1}
    assert adapter.results[0][1].startswith("The run failed: resuming")
    assert all(secret not in text for _, text in adapter.results for secret in SECRETS)
    assert run_id != failed


async def test_platform_errors_never_reach_the_database(db_url: str) -> None:
    route = {"timeout": "30m", "slack": {"channel": "C_LEAK",
                                         "approvers": {"users": ["U_ALICE"]}}}
    engine, _, _ = make_engine(db_url, route=route)
    adapter = LeakyAdapter()
    engine.register_adapter(adapter, FakeDirectory())
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)  # undeliverable
    await engine.run_worker_once()
    stored = dump(engine)
    for secret in SECRETS:
        assert secret not in stored
    with engine.db.transaction() as session:
        request = session.scalars(select(HumanRequest)).one()
        assert request.status == "unavailable" and request.result is not None
        # People and the agent read words; the (scrubbed) platform error stays in the audit.
        assert "could not be delivered" in request.result["message"]
        assert "token" not in request.result["message"]
    assert "refused with token *** / ***" in stored
