"""Fakes for engine tests: clock, platform adapter, directory, runtimes, settings."""

from __future__ import annotations

import datetime as dt
import itertools
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from bot.agents import AgentSpec, Outcome, build_runtime
from bot.agents.base import AgentRuntime
from bot.askhuman.schema import AskHumanToolResult, DeferredToolCallPayload
from bot.engine import (
    DeliveryError,
    DeliveryRef,
    DeliveryTarget,
    Engine,
    Identity,
    Origin,
    PostKey,
)
from bot.settings import FileSettings, Settings
from renderers.card import RequestCard
from storage import Database

T0 = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)
STARTER = Identity("slack", "U_STARTER", "Starter")
STARTERS: dict[str, Any] = {"slack": {"users": ["U_STARTER"]}}
"""Who may start the test agents (``STARTER``)."""
ORIGIN = Origin("slack", "C_ORIGIN", "1700000000.000100")


class FakeClock:
    def __init__(self, now: dt.datetime = T0) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


@dataclass
class FakeAdapter:
    platform: str = "slack"
    fail_targets: set[str] = field(default_factory=set)
    delivered: list[tuple[RequestCard, DeliveryTarget]] = field(default_factory=list)
    updates: list[tuple[RequestCard, DeliveryRef]] = field(default_factory=list)
    results: list[tuple[Origin, str]] = field(default_factory=list)
    keys: list[PostKey | None] = field(default_factory=list)
    """The idempotency key of every deliver / post_run_result call, in order."""
    _ids: Any = field(default_factory=lambda: itertools.count(1))

    async def deliver(self, card: RequestCard, target: DeliveryTarget,
                      key: PostKey | None = None) -> DeliveryRef:
        self.keys.append(key)
        if target.id in self.fail_targets or "*" in self.fail_targets:
            raise DeliveryError(f"channel_not_found ({target.id})")
        self.delivered.append((card, target))
        return DeliveryRef(self.platform, target.id, f"m{next(self._ids)}")

    async def update(self, card: RequestCard, ref: DeliveryRef) -> None:
        self.updates.append((card, ref))

    async def post_run_result(self, origin: Origin, text: str,
                              key: PostKey | None = None) -> None:
        self.keys.append(key)
        self.results.append((origin, text))


@dataclass
class FakeDirectory:
    groups: dict[str, set[str]] = field(default_factory=dict)
    chats: dict[str, set[str]] = field(default_factory=dict)
    emails: dict[str, str] = field(default_factory=dict)

    async def resolve_users(self, users: list[str]) -> set[str]:
        return {self.emails.get(u, u) for u in users}

    async def group_members(self, group_id: str) -> set[str]:
        return self.groups.get(group_id, set())

    async def chat_members(self, chat_id: str) -> set[str]:
        return self.chats.get(chat_id, set())


class AskingRuntime:
    """Asks once with ``args``, then finishes with the result it got (as JSON)."""

    name = "fake"

    def __init__(self, args: dict[str, Any], fail_resumes: int = 0) -> None:
        self.args = args
        self.fail_resumes = fail_resumes
        self.resumes: list[dict[str, AskHumanToolResult]] = []

    async def run(self, prompt: str) -> Outcome:
        call = DeferredToolCallPayload(tool_call_id="call_1", tool_name="ask_human",
                                       args=self.args)
        return Outcome.asking(call, {"prompt": prompt})

    async def resume(
        self, snapshot: dict[str, JsonValue], results: dict[str, AskHumanToolResult]
    ) -> Outcome:
        self.resumes.append(results)
        if len(self.resumes) <= self.fail_resumes:
            raise RuntimeError(f"model unavailable (try {len(self.resumes)})")
        result = results["call_1"].model_dump(mode="json")
        return Outcome.finished({"got": result}, {**snapshot, "done": True})


FORM_ARGS: dict[str, Any] = {
    "question": "Refund?",
    "fields": [
        {"type": "select", "name": "environment", "label": "Environment", "required": True,
         "options": [{"value": "staging", "label": "Staging"},
                     {"value": "production", "label": "Production"}]},
        {"type": "number", "name": "amount", "label": "Amount", "min_value": 1,
         "max_value": 500},
        {"type": "paragraph", "name": "comment", "label": "Comment"},
        {"type": "file-list", "name": "logs", "label": "Logs", "max_files": 2},
    ],
    "actions": [{"id": "approve", "label": "Approve"}, {"id": "reject", "label": "Reject"}],
}


def settings(route: dict[str, Any] | None = None, url: str = "sqlite://") -> Settings:
    """Agents ``deploy`` (scripted) and ``form`` on route ``ops`` (Slack channel C_OPS)."""
    ops = route or {
        "timeout": "30m",
        "slack": {"channel": "C_OPS", "approvers": {"users": ["U_ALICE", "U_BOB"]}},
    }
    parsed = FileSettings.model_validate({
        "agents": {
            "deploy": {"model": "scripted:deploy", "route": "ops", "starters": STARTERS},
            "form": {"model": "fake", "route": "ops", "starters": STARTERS, "ask_human": {
                "allow_file_fields": True,
                "allowed_field_types": ["paragraph", "select", "multi-select", "number",
                                        "checkbox", "date", "file", "file-list"]}},
        },
        "routes": {"ops": ops},
    })
    return Settings(database_url=url, agents=parsed.agents, routes=parsed.routes)


def scripted_runtimes(fake: AgentRuntime | None = None) -> Any:
    def build(name: str) -> AgentRuntime:
        if name == "form" and fake is not None:
            return fake
        return build_runtime(AgentSpec(name=name, model=f"scripted:{name}"))

    return build


def make_engine(
    db_url: str,
    route: dict[str, Any] | None = None,
    fake: AgentRuntime | None = None,
    clock: FakeClock | None = None,
    directory: FakeDirectory | None = None,
    **kwargs: Any,
) -> tuple[Engine, FakeAdapter, FakeClock]:
    db = Database(db_url)
    db.upgrade()
    clock = clock or FakeClock()
    engine = Engine(db, settings(route, db_url), scripted_runtimes(fake), clock, **kwargs)
    adapter = FakeAdapter()
    engine.register_adapter(adapter, directory or FakeDirectory())
    return engine, adapter, clock


def alice() -> Identity:
    return Identity("slack", "U_ALICE", "Alice")


def kill_when(child: subprocess.Popen[str], marker: Path) -> None:
    """SIGKILL ``child`` as soon as it creates ``marker`` (its crash point)."""
    deadline = time.monotonic() + 60
    while not marker.exists():
        if child.poll() is not None:
            raise AssertionError(f"child exited early: {child.communicate()[1]}")
        assert time.monotonic() < deadline, "child never reached the crash point"
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=30)  # reaps it and closes its pipes
    assert child.returncode == -signal.SIGKILL
