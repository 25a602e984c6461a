"""Waiting: escalation chains at percentages across replicas, percentage reminders,
fail-safe timeouts with an ``on_timeout`` notice (real engines, SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.engine import Engine, Identity, delivery, store
from bot.settings import ConfigError, FileSettings, Settings, load_file
from renderers.slack import render_request
from renderers.text import render_text
from storage import Database, HumanRequest, OutboxItem
from tests.engine.helpers import (
    ORIGIN,
    STARTER,
    STARTERS,
    FakeClock,
    FakeDirectory,
    alice,
    scripted_runtimes,
)
from tests.engine.test_reminders import ANSWER, CAROL, RemindingAdapter, audits, row

DAVE = Identity("slack", "U_DAVE", "Dave")  # approver of the second step (managers)
CHAIN = [{"after": "50%", "route": "oncall"}, {"after": "90%", "route": "managers"}]


def config(ops: dict[str, Any]) -> FileSettings:
    return FileSettings.model_validate({
        "agents": {"deploy": {"model": "scripted:deploy", "route": "ops",
                              "starters": STARTERS}},
        "routes": {
            "ops": {"timeout": "1h", "slack": {"channel": "C_OPS",
                                               "approvers": {"users": ["U_ALICE"]}}, **ops},
            "oncall": {"slack": {"channel": "C_ONCALL", "approvers": {"users": ["U_CAROL"]}}},
            "managers": {"slack": {"channel": "C_MGR", "approvers": {"users": ["U_DAVE"]}}},
            "audit": {"slack": {"channel": "C_AUDIT", "approvers": {"users": ["U_AUD"]}}},
        },
    })


def replica(db_url: str, ops: dict[str, Any], clock: FakeClock) -> tuple[Engine, Any]:
    parsed = config(ops)
    settings = Settings(database_url=db_url, agents=parsed.agents, routes=parsed.routes)
    db = Database(db_url)
    db.upgrade()
    engine = Engine(db, settings, scripted_runtimes(), clock)
    adapter = RemindingAdapter()
    engine.register_adapter(adapter, FakeDirectory())
    return engine, adapter


async def test_escalation_chain_at_percentages_across_replicas(db_url: str) -> None:
    clock = FakeClock()
    engines = [replica(db_url, {"escalation": CHAIN}, clock) for _ in range(3)]
    first, adapter = engines[0]
    await first.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref

    async def sweep_everywhere() -> int:
        counts = await asyncio.gather(*(e.remind_and_escalate_due()
                                        for e, _ in engines for _ in range(2)))
        return sum(counts)

    def delivered() -> list[str]:
        return sorted(t.id for _, a in engines for _, t in a.delivered)

    clock.advance(29 * 60)  # 50% of 1h is 30m
    assert await sweep_everywhere() == 0
    assert (await first.respond(ref, CAROL, "approve", ANSWER)).outcome == "rejected"
    clock.advance(60)
    assert await sweep_everywhere() == 1  # step 1, claimed by exactly one replica
    assert delivered() == ["C_ONCALL", "C_OPS"]
    assert await sweep_everywhere() == 0
    request = row(first)
    assert request.escalation_step == 1 and request.escalated_routes == ["oncall"]
    card = await first.card(ref)
    assert card is not None and card.escalated_to == ("oncall",)
    assert "Escalated to oncall" in render_text(card)
    assert (await first.respond(ref, DAVE, "approve", ANSWER)).outcome == "rejected"
    clock.advance(24 * 60)  # 90% is 54m
    assert await sweep_everywhere() == 1
    assert delivered() == ["C_MGR", "C_ONCALL", "C_OPS"]
    clock.advance(5 * 60)
    assert await sweep_everywhere() == 0  # the chain has ended
    assert audits(first, "escalated") == 2
    card = await first.card(ref)
    assert card is not None and card.escalated_to == ("oncall", "managers")
    # the approvers of every reached step may answer: Carol (step 1) records the decision
    assert [c.ref for c in await first.pending_for(CAROL)] == [ref]
    assert [c.ref for c in await first.pending_for(DAVE)] == [ref]
    second = engines[1][0]
    assert (await second.respond(ref, CAROL, "approve", ANSWER)).outcome == "accepted"
    assert (await first.respond(ref, DAVE, "approve", ANSWER)).outcome == "already_decided"


async def test_old_single_escalation_form_is_a_one_step_chain(db_url: str) -> None:
    clock = FakeClock()
    engine, adapter = replica(db_url, {"escalation": {"after": "10m", "route": "oncall"}},
                              clock)
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    clock.advance(10 * 60)
    assert await engine.remind_and_escalate_due() == 1
    clock.advance(40 * 60)
    assert await engine.remind_and_escalate_due() == 0
    assert [t.id for _, t in adapter.delivered] == ["C_OPS", "C_ONCALL"]
    assert row(engine).escalate_at is None and row(engine).escalation_route == "oncall"


async def test_reminders_as_percentages_show_on_the_card(db_url: str) -> None:
    clock = FakeClock()
    engine, adapter = replica(db_url, {"reminder": "25%", "max_reminders": 5}, clock)
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    clock.advance(14 * 60)
    assert await engine.remind_and_escalate_due() == 0
    clock.advance(60)  # 25% of 1h
    assert await engine.remind_and_escalate_due() == 1
    reminded = clock.now
    clock.advance(15 * 60)
    assert await engine.remind_and_escalate_due() == 1
    clock.advance(15 * 60)
    assert await engine.remind_and_escalate_due() == 1
    clock.advance(15 * 60)  # the 4th would fall on the deadline: none
    assert await engine.remind_and_escalate_due() == 0
    assert len(adapter.reminders) == 3
    card = await engine.card(ref)
    assert card is not None and card.reminded_at == reminded + 30 * 60 * _SECOND
    text = render_text(card)
    assert "Last reminded 2025-03-01 12:45 UTC" in text
    slack = str(render_request(card))
    assert "Last reminded 2025-03-01 12:45 UTC" in slack
    # the copies were updated with it
    assert adapter.updates[-1][0].reminded_at == card.reminded_at


_SECOND = __import__("datetime").timedelta(seconds=1)


async def test_timeout_never_approves_and_notifies_once(db_url: str) -> None:
    clock = FakeClock()
    engines = [replica(db_url, {"on_timeout": {"notify": "audit"}}, clock) for _ in range(2)]
    (first, adapter), (second, adapter2) = engines
    await first.start_run("deploy", "Deploy <!channel> v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    clock.advance(60 * 60)
    counts = await asyncio.gather(first.expire_due(), second.expire_due(), first.expire_due())
    assert sum(counts) == 1
    await first.run_worker_once()
    await second.run_worker_once()
    request = row(first)
    assert request.status == "timeout" and request.action_id == "__timeout"
    notices = [(o, t) for a in (adapter, adapter2) for o, t in a.results
               if o.channel == "C_AUDIT"]
    assert len(notices) == 1, notices
    origin, text = notices[0]
    assert origin.platform == "slack" and origin.thread is None
    assert text.startswith("Timed out: no decision.") and "nothing was approved" in text
    assert ref in text
    assert audits(first, "timeout_notified") == 1
    card = await first.card(ref)
    assert card is not None and card.status == "timeout"
    assert "Timed out: no decision" in render_text(card)
    assert "Timed out: no decision" in str(render_request(card))
    # a late click is refused, and the timeout stays (never an approval)
    late = await first.respond(ref, alice(), "approve", ANSWER)
    assert late.outcome == "already_decided" and row(first).status == "timeout"
    with first.db.transaction() as s:
        payloads = [p for (p,) in s.execute(select(OutboxItem.payload)
                                            .where(OutboxItem.kind == "post_run_result"))]
    assert [p.get("notice") for p in payloads].count("timeout") == 1  # durable, once


async def test_a_click_at_the_deadline_times_out_with_one_notice(db_url: str) -> None:
    clock = FakeClock()
    engine, adapter = replica(db_url, {"on_timeout": {"notify": "audit"}}, clock)
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    clock.advance(60 * 60)
    late = await engine.respond(ref, alice(), "approve", ANSWER)
    assert late.outcome == "already_decided" and "timed out" in late.message
    assert await engine.expire_due() == 0
    await engine.run_worker_once()
    assert [o.channel for o, _ in adapter.results].count("C_AUDIT") == 1
    with engine.db.transaction() as s:
        assert s.scalars(select(HumanRequest.status)).one() == "timeout"


async def test_a_decided_card_is_the_last_version_and_is_sent_without_a_recheck(
        db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing moves a decided request's version on (no reminder, escalation, timeout or
    vote), so its card update skips the version read that follows a pending card's."""
    clock = FakeClock()
    engine, adapter = replica(db_url, {"reminder": "25%", "escalation": CHAIN}, clock)
    rechecks: list[str] = []
    version_of = delivery._version_of

    def counted(session: Any, *, ref: str) -> int | None:
        rechecks.append(ref)
        return version_of(session, ref=ref)

    monkeypatch.setattr(delivery, "_version_of", counted)
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    clock.advance(15 * 60)
    assert await engine.remind_and_escalate_due() == 1  # a pending card's new version
    await engine.run_worker_once()
    assert [c.version for c, _ in adapter.updates] == [2] and rechecks == [ref]
    assert (await engine.respond(ref, alice(), "approve", ANSWER)).outcome == "accepted"
    await engine.run_worker_once()
    decided = row(engine).version
    assert [c.version for c, _ in adapter.updates] == [2, decided] and rechecks == [ref]
    clock.advance(2 * 60 * 60)  # every reminder, escalation step and the deadline passed
    assert await engine.remind_and_escalate_due() == 0
    assert await engine.expire_due() == 0
    assert (await engine.respond(ref, CAROL, "approve", ANSWER)).outcome != "accepted"
    await engine.run_worker_once()
    assert row(engine).version == decided and row(engine).status == "submitted"
    assert [c.version for c, _ in adapter.updates] == [2, decided]


async def test_a_new_version_of_a_decided_request_is_refused(db_url: str) -> None:
    clock = FakeClock()
    engine, adapter = replica(db_url, {}, clock)
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    assert (await engine.respond(ref, alice(), "approve", ANSWER)).outcome == "accepted"
    with engine.db.transaction() as s:
        request = s.scalars(select(HumanRequest)).one()
        with pytest.raises(RuntimeError, match="no longer pending"):
            store.bump_version(s, clock.now, request)


def _problems(tmp_path: Path, ops: str) -> list[str]:
    path = tmp_path / "askhuman.yaml"
    path.write_text("routes:\n  ops:\n    timeout: 1h\n    console: {}\n" + ops
                    + "  oncall:\n    console: {}\n  dm:\n    slack: {users: [U1], "
                    "approvers: {users: [U1]}}\n")
    with pytest.raises(ConfigError) as info:
        load_file(path)
    return info.value.problems


@pytest.mark.parametrize(("ops", "expected"), [
    ("    escalation: [{after: 50%, route: oncall}, {after: 40%, route: dm}]\n",
     "routes.ops.escalation.1.after: must come after the step before it (40% is not "
     "later); list the steps in the order they happen"),
    ("    escalation: [{after: 50%, route: oncall}, {after: 1h, route: dm}]\n",
     "routes.ops.escalation.1.after: must be shorter than timeout (1h is not shorter than "
     "1h); lower escalation.1.after or raise timeout"),
    ("    escalation: [{after: 10m, route: oncall}, {after: 20m, route: nope}]\n",
     "routes.ops.escalation.1.route: route 'nope' is not defined under routes; name one "
     "of: dm, oncall"),
    ("    escalation: [{after: 120%, route: oncall}]\n",
     "routes.ops.escalation.0.after: a percentage must be between 0% and 100% (got 120%)"),
    ("    reminder: 0%\n",
     "routes.ops.reminder: a percentage must be between 0% and 100% (got 0%)"),
    ("    on_timeout: {notify: nope}\n",
     "routes.ops.on_timeout.notify: route 'nope' is not defined under routes; name one of: "
     "dm, oncall, ops"),
    ("    on_timeout: {notify: dm}\n",
     "routes.ops.on_timeout.notify: route 'dm' has no slack.channel or feishu.chat_id to "
     "post the notice in; set one on that route or name another route"),
    ("    on_timeout: {notify: oncall, page: true}\n",
     "routes.ops.on_timeout.page: unknown key; remove it or check its spelling"),
])
def test_config_errors_name_the_key_and_the_fix(tmp_path: Path, ops: str,
                                               expected: str) -> None:
    assert _problems(tmp_path, ops) == [expected]


def test_chain_and_percentages_parse(tmp_path: Path) -> None:
    path = tmp_path / "askhuman.yaml"
    path.write_text("routes:\n  ops:\n    timeout: 2h\n    console: {}\n    reminder: 25%\n"
                    "    escalation: [{after: 30m, route: oncall}, {after: 90%, route: dm}]\n"
                    "  oncall:\n    console: {}\n  dm:\n    console: {}\n")
    ops = load_file(path).routes["ops"]
    assert str(ops.reminder) == "25%"
    assert ops.escalation is not None and [s.route for s in ops.escalation] == ["oncall", "dm"]
    assert ops.escalation[0].after == 1800 and str(ops.escalation[1].after) == "90%"


def test_waiting_notes_on_every_renderer_in_both_locales() -> None:
    import dataclasses
    import datetime as dt

    from bot.askhuman.schema import AskHumanToolArgs
    from renderers.card import RequestCard
    from renderers.feishu import render_card

    card = RequestCard(ref="r1", args=AskHumanToolArgs(question="Deploy?"), agent_name="deploy",
                       escalated_to=("oncall", "<!channel>"),
                       reminded_at=dt.datetime(2025, 3, 1, 12, 15, tzinfo=dt.UTC))
    slack = str(render_request(card))
    assert "Escalated to oncall, &lt;!channel&gt;" in slack  # route names are escaped too
    assert "Last reminded 2025-03-01 12:15 UTC" in slack
    assert "Escalated to oncall" in str(render_card(card))
    zh = dataclasses.replace(card, locale="zh-CN", timezone="Asia/Shanghai")
    assert "已升级至 oncall" in render_text(zh) and "上次提醒 2025-03-01 20:15" in render_text(zh)
    done = dataclasses.replace(zh, status="timeout", decided_at=card.reminded_at)
    assert "已超时：未作决定" in render_text(done) and "上次提醒" not in render_text(done)


async def test_a_reload_does_not_move_an_open_requests_chain(db_url: str) -> None:
    """The chain is frozen with the request: removing the escalation from the config
    (a reload) still escalates the request raised before it, to the route as it was."""
    clock = FakeClock()
    engine, adapter = replica(db_url, {"escalation": CHAIN}, clock)
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    reloaded = config({})
    del reloaded.routes["oncall"]  # the step's route is gone from the live config too
    engine.apply_settings(Settings(database_url=db_url, agents=reloaded.agents,
                                   routes=reloaded.routes))
    clock.advance(31 * 60)
    assert await engine.remind_and_escalate_due() == 1
    assert sorted(t.id for _, t in adapter.delivered) == ["C_ONCALL", "C_OPS"]
    ref = adapter.delivered[0][0].ref
    assert (await engine.respond(ref, CAROL, "approve", ANSWER)).outcome == "accepted"
