"""Reminders and escalation: due sweeps, compare-and-set claims, authorization, settings."""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from bot.engine import DeliveryRef, Engine, Identity, PostKey
from bot.engine.dispatch import Handler
from bot.settings import ConfigError, FileSettings, Settings, load_file
from renderers.card import RequestCard
from storage import AuditLog, Database, HumanRequest
from tests.engine.helpers import (
    ORIGIN,
    STARTER,
    STARTERS,
    FakeAdapter,
    FakeClock,
    FakeDirectory,
    alice,
    scripted_runtimes,
)

CAROL = Identity("slack", "U_CAROL", "Carol")  # approver of the escalation route only
ANSWER = {"environment": "staging"}


@dataclass
class RemindingAdapter(FakeAdapter):
    reminders: list[tuple[str, DeliveryRef, str]] = field(default_factory=list)

    async def remind(self, card: RequestCard, ref: DeliveryRef, text: str,
                     key: PostKey | None = None) -> None:
        self.reminders.append((card.ref, ref, text))


def ops_route(**extra: Any) -> dict[str, Any]:
    return {
        "timeout": "1h",
        "slack": {"channel": "C_OPS", "approvers": {"users": ["U_ALICE"]}},
        **extra,
    }


def build(db_url: str, ops: dict[str, Any], adapter: FakeAdapter | None = None,
          clock: FakeClock | None = None) -> tuple[Engine, Any, FakeClock]:
    parsed = FileSettings.model_validate({
        "agents": {"deploy": {"model": "scripted:deploy", "route": "ops",
                              "starters": STARTERS}},
        "routes": {
            "ops": ops,
            "oncall": {"timeout": "1h", "slack": {"channel": "C_ONCALL", "users": ["U_PAGER"],
                                                  "approvers": {"users": ["U_CAROL"]}}},
        },
    })
    settings = Settings(database_url=db_url, agents=parsed.agents, routes=parsed.routes)
    db = Database(db_url)
    db.upgrade()
    clock = clock or FakeClock()
    engine = Engine(db, settings, scripted_runtimes(), clock)
    adapter = adapter or RemindingAdapter()
    engine.register_adapter(adapter, FakeDirectory())
    return engine, adapter, clock


async def ask(db_url: str, **ops: Any) -> tuple[Engine, Any, FakeClock, str]:
    engine, adapter, clock = build(db_url, ops_route(**ops))
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    return engine, adapter, clock, adapter.delivered[0][0].ref


def row(engine: Engine) -> HumanRequest:
    with engine.db.transaction() as s:
        request = s.scalars(select(HumanRequest)).one()
        s.expunge(request)
        return request


def audits(engine: Engine, event: str) -> int:
    with engine.db.transaction() as s:
        return int(s.scalar(select(func.count()).select_from(AuditLog)
                            .where(AuditLog.event == event)) or 0)


# ---------------------------------------------------------------- reminders


async def test_reminders_every_period_until_the_cap(db_url: str) -> None:
    engine, adapter, clock, ref = await ask(db_url, reminder="10m", max_reminders=2)
    assert row(engine).next_reminder_at is not None and row(engine).reminders_sent == 0
    clock.advance(9 * 60)
    assert await engine.remind_and_escalate_due() == 0 and adapter.reminders == []
    clock.advance(60)
    assert await engine.remind_and_escalate_due() == 1
    assert await engine.remind_and_escalate_due() == 0  # once per due period
    [(got_ref, copy, text)] = adapter.reminders
    assert got_ref == ref and copy.message_id == "m1" and copy.channel == "C_OPS"
    assert text == ("Reminder 1: this request from deploy is still waiting for an answer "
                    "(due 2025-03-01 13:00 UTC).")
    assert row(engine).reminders_sent == 1
    clock.advance(10 * 60)
    assert await engine.remind_and_escalate_due() == 1
    clock.advance(10 * 60)
    assert await engine.remind_and_escalate_due() == 0  # max_reminders reached
    assert len(adapter.reminders) == 2 and row(engine).reminders_sent == 2
    assert row(engine).next_reminder_at is None
    assert audits(engine, "reminded") == 2
    # delivery + two reminders + two card updates ("Last reminded …")
    assert await engine.outbox_states() == {"done": 5}
    assert adapter.updates[-1][0].reminded_at == clock.now - dt.timedelta(minutes=10)


async def test_no_reminder_after_a_decision(db_url: str) -> None:
    engine, adapter, clock, ref = await ask(db_url, reminder="10m")
    assert (await engine.respond(ref, alice(), "approve", ANSWER)).outcome == "accepted"
    clock.advance(11 * 60)
    assert await engine.remind_and_escalate_due() == 0 and adapter.reminders == []


async def test_no_reminder_after_the_deadline(db_url: str) -> None:
    engine, adapter, clock, _ref = await ask(db_url, reminder="50m")
    clock.advance(61 * 60)  # overdue but not yet swept: no reminder either
    assert await engine.remind_and_escalate_due() == 0
    assert await engine.expire_due() == 1
    assert await engine.remind_and_escalate_due() == 0 and adapter.reminders == []


async def test_reminder_queued_before_a_decision_is_not_sent(db_url: str) -> None:
    """The click wins the race after the claim: the outbox row sees it and stays quiet."""
    engine, adapter, clock, ref = await ask(db_url, reminder="10m")
    clock.advance(10 * 60)
    original = engine.deliveries.send_reminders

    async def decide_first(claim: Any) -> Any:
        assert (await engine.respond(ref, alice(), "approve", ANSWER)).outcome == "accepted"
        return await original(claim)

    engine.outbox.handlers["remind"] = Handler(decide_first)  # the registry is the seam
    assert await engine.remind_and_escalate_due() == 1
    assert adapter.reminders == [] and row(engine).status == "submitted"
    assert audits(engine, "decided") == 1


async def test_adapters_without_remind_are_tolerated(db_url: str) -> None:
    engine, _adapter, clock = build(db_url, ops_route(reminder="10m"), FakeAdapter())
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    clock.advance(10 * 60)
    assert await engine.remind_and_escalate_due() == 1
    assert await engine.outbox_states() == {"done": 3}


async def test_failed_reminder_is_retried_without_repeats(db_url: str) -> None:
    engine, adapter, clock, _ref = await ask(db_url, reminder="10m", escalation={
        "after": "5m", "route": "oncall"})
    clock.advance(5 * 60)
    assert await engine.remind_and_escalate_due() == 1  # escalated: three copies now
    clock.advance(5 * 60)
    calls: list[str] = []
    original = adapter.remind

    async def flaky(card: RequestCard, ref: DeliveryRef, text: str,
                    key: PostKey | None = None) -> None:
        calls.append(ref.channel)
        if ref.channel == "U_PAGER" and calls.count("U_PAGER") == 1:
            raise RuntimeError("connection reset")
        await original(card, ref, text, key)

    adapter.remind = flaky
    assert await engine.remind_and_escalate_due() == 1
    assert await engine.outbox_states() == {"done": 4, "queued": 1}
    clock.advance(60)
    await engine.run_worker_once()
    assert sorted(r.channel for _, r, _ in adapter.reminders) == ["C_ONCALL", "C_OPS",
                                                                  "U_PAGER"]
    assert calls.count("C_OPS") == 1 and calls.count("U_PAGER") == 2
    assert await engine.outbox_states() == {"done": 5}


async def test_two_engines_sweeping_at_once_remind_once(db_url: str) -> None:
    clock = FakeClock()
    first, adapter1, _ = build(db_url, ops_route(reminder="10m", escalation={
        "after": "10m", "route": "oncall"}), clock=clock)
    second, adapter2, _ = build(db_url, ops_route(reminder="10m", escalation={
        "after": "10m", "route": "oncall"}), clock=clock)
    await first.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    clock.advance(10 * 60)
    counts = await asyncio.gather(*(e.remind_and_escalate_due()
                                    for e in (first, second, first, second)))
    assert sum(counts) == 2  # one reminder + one escalation, whoever claimed them
    assert len(adapter1.reminders) + len(adapter2.reminders) == 1
    escalated = [t.id for _, t in adapter1.delivered + adapter2.delivered][1:]
    assert sorted(escalated) == ["C_ONCALL", "U_PAGER"]
    assert audits(first, "reminded") == 1 and audits(first, "escalated") == 1


# ---------------------------------------------------------------- escalation


async def test_escalation_delivers_once_and_widens_approvers(db_url: str) -> None:
    engine, adapter, clock, ref = await ask(db_url, escalation={"after": "20m",
                                                                "route": "oncall"})
    refused = await engine.respond(ref, CAROL, "approve", ANSWER)
    assert refused.outcome == "rejected"
    clock.advance(20 * 60)
    assert await engine.remind_and_escalate_due() == 1
    assert await engine.remind_and_escalate_due() == 0
    assert [(c.ref, t.id) for c, t in adapter.delivered] == [
        (ref, "C_OPS"), (ref, "C_ONCALL"), (ref, "U_PAGER")]
    request = row(engine)
    assert request.escalation_route == "oncall" and request.escalated_at is not None
    assert request.deadline is not None  # the deadline stays the original route's
    assert (request.deadline - request.created_at).total_seconds() == 3600
    assert await engine.card(ref) is not None
    accepted = await engine.respond(ref, CAROL, "approve", ANSWER)
    assert accepted.outcome == "accepted", accepted.message
    # the original copy first says "escalated to oncall"; then every copy, the escalated
    # ones too, is updated with the decision
    [(first, copy)] = adapter.updates[:1]
    assert copy.channel == "C_OPS" and first.escalated_to == ("oncall",)
    assert sorted(r.channel for c, r in adapter.updates if c.status == "submitted") == [
        "C_ONCALL", "C_OPS", "U_PAGER"]


async def test_original_approvers_still_answer_after_escalation(db_url: str) -> None:
    engine, _adapter, clock, ref = await ask(db_url, escalation={"after": "20m",
                                                                "route": "oncall"})
    clock.advance(20 * 60)
    assert await engine.remind_and_escalate_due() == 1
    mallory = Identity("slack", "U_MALLORY", "Mallory")
    assert (await engine.respond(ref, mallory, "approve", ANSWER)).outcome == "rejected"
    assert [c.ref for c in await engine.pending_for(CAROL)] == [ref]
    assert (await engine.respond(ref, alice(), "approve", ANSWER)).outcome == "accepted"


async def test_no_escalation_after_a_decision(db_url: str) -> None:
    engine, adapter, clock, ref = await ask(db_url, escalation={"after": "20m",
                                                                "route": "oncall"})
    assert (await engine.respond(ref, alice(), "approve", ANSWER)).outcome == "accepted"
    clock.advance(20 * 60)
    assert await engine.remind_and_escalate_due() == 0
    assert len(adapter.delivered) == 1 and audits(engine, "escalated") == 0
    assert (await engine.respond(ref, CAROL, "approve", ANSWER)).outcome == "already_decided"


async def test_click_racing_the_sweep_gives_one_decision(db_url: str) -> None:
    engine, _adapter, clock, ref = await ask(db_url, reminder="10m",
                                            escalation={"after": "10m", "route": "oncall"})
    clock.advance(10 * 60)
    results = await asyncio.gather(
        engine.remind_and_escalate_due(), engine.respond(ref, alice(), "approve", ANSWER),
        engine.remind_and_escalate_due(), engine.respond(ref, alice(), "reject", ANSWER))
    outcomes = sorted(r.outcome for r in results[1::2])  # type: ignore[union-attr]
    assert outcomes == ["accepted", "already_decided"]
    assert audits(engine, "decided") == 1 and row(engine).status == "submitted"
    assert audits(engine, "reminded") <= 1 and audits(engine, "escalated") <= 1


# ---------------------------------------------------------------- settings


def _problems(tmp_path: Path, ops: str, extra: str = "") -> list[str]:
    path = tmp_path / "askhuman.yaml"
    path.write_text("routes:\n  ops:\n    timeout: 30m\n    console: {}\n" + ops + extra)
    with pytest.raises(ConfigError) as info:
        load_file(path)
    return info.value.problems


ONCALL = "  oncall:\n    console: {}\n"


def test_settings_accept_reminder_and_escalation(tmp_path: Path) -> None:
    path = tmp_path / "askhuman.yaml"
    path.write_text("routes:\n  ops:\n    timeout: 30m\n    console: {}\n    reminder: 10m\n"
                    "    max_reminders: 2\n    escalation: {after: 15m, route: oncall}\n"
                    + ONCALL)
    ops = load_file(path).routes["ops"]
    assert ops.reminder == 600 and ops.max_reminders == 2
    assert ops.escalation is not None and len(ops.escalation) == 1  # a one-step chain
    assert ops.escalation[0].after == 900 and ops.escalation[0].route == "oncall"


@pytest.mark.parametrize(("ops", "expected"), [
    ("    reminder: 30m\n",
     "routes.ops.reminder: must be shorter than timeout (30m is not shorter than 30m); "
     "lower reminder or raise timeout"),
    ("    reminder: often\n",
     'routes.ops.reminder: write a duration like "30m", "2h" or "1d", or a number of seconds, '
     'or a percentage of the timeout like "50%"'),
    ("    escalation: {after: 1h, route: oncall}\n",
     "routes.ops.escalation.after: must be shorter than timeout (1h is not shorter than "
     "30m); lower escalation.after or raise timeout"),
    ("    escalation: {after: later, route: oncall}\n",
     'routes.ops.escalation.0.after: write a duration like "30m", "2h" or "1d", or a number '
     'of seconds, or a percentage of the timeout like "50%"'),
    ("    escalation: {after: 10m, route: nope}\n",
     "routes.ops.escalation.route: route 'nope' is not defined under routes; "
     "name one of: oncall"),
    ("    escalation: {after: 10m, route: ops}\n",
     "routes.ops.escalation.route: a route cannot escalate to itself; name another route "
     "(define one under routes, e.g. oncall)"),
    ("    max_reminders: 0\n",
     "routes.ops.max_reminders: Input should be greater than or equal to 1"),
])
def test_settings_errors_name_key_paths(tmp_path: Path, ops: str, expected: str) -> None:
    assert _problems(tmp_path, ops, ONCALL) == [expected]
