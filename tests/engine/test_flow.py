"""End to end through the engine with the scripted deploy agent, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

from bot.askhuman.schema import timeout_result
from bot.engine import Identity, UnknownAgentError
from storage import AuditLog, HumanRequest, ResumeJob, Run
from tests.engine.helpers import ORIGIN, STARTER, alice, make_engine


async def _ask(db_url: str, **kwargs: Any) -> Any:
    engine, adapter, clock = make_engine(db_url, **kwargs)
    run_id = await engine.start_run("deploy", "Deploy v1.2.3", STARTER, ORIGIN)
    assert len(adapter.delivered) == 1
    card, target = adapter.delivered[0]
    assert target.id == "C_OPS" and card.status == "pending" and card.agent_name == "deploy"
    return engine, adapter, clock, run_id, card


def _audit(engine: Any, event: str) -> int:
    with engine.db.transaction() as s:
        return int(s.scalar(select(func.count()).select_from(AuditLog)
                            .where(AuditLog.event == event)) or 0)


async def test_approve_resumes_agent_and_posts_output(db_url: str) -> None:
    engine, adapter, _, run_id, card = await _ask(db_url)
    result = await engine.respond(card.ref, alice(), "approve", {"environment": "production"})
    assert result.outcome == "accepted", result.message
    assert result.card is not None and result.card.status == "submitted"
    assert result.card.decided_by_name == "Alice" and result.card.version == 2
    assert [u[0].status for u in adapter.updates] == ["submitted"]
    assert adapter.updates[0][1].message_id == "m1"
    assert await engine.run_worker_once() == 1
    assert adapter.results == [(ORIGIN, "Deployed v1.2.3 to production. Health checks are green.")]
    with engine.db.transaction() as s:
        run = s.get(Run, run_id)
        assert run is not None and run.status == "succeeded"
    assert await engine.run_worker_once() == 0
    assert _audit(engine, "resumed") == 1


async def test_reject_gives_a_different_answer(db_url: str) -> None:
    engine, adapter, _, _, card = await _ask(db_url)
    res = await engine.respond(card.ref, alice(), "reject", {"environment": "staging",
                                                            "comment": "not today"})
    assert res.outcome == "accepted"
    await engine.run_worker_once()
    assert "rejected" in adapter.results[0][1] and "not today" in adapter.results[0][1]


async def test_timeout_gives_dify_result_and_agent_reacts(db_url: str) -> None:
    engine, adapter, clock, _, card = await _ask(db_url)
    assert await engine.expire_due() == 0
    clock.advance(30 * 60 + 1)
    assert await engine.expire_due() == 1
    with engine.db.transaction() as s:
        req = s.scalars(select(HumanRequest)).one()
        assert req.status == "timeout"
        assert req.result == timeout_result().model_dump(mode="json")
    late = await engine.respond(card.ref, alice(), "approve", {"environment": "staging"})
    assert late.outcome == "already_decided" and "timed out" in late.message
    assert await engine.expire_due() == 0
    await engine.run_worker_once()
    assert "No approval for v1.2.3 arrived in time" in adapter.results[0][1]


async def test_second_answer_is_already_decided(db_url: str) -> None:
    engine, _, _, _, card = await _ask(db_url)
    assert (await engine.respond(card.ref, alice(), "approve",
                                 {"environment": "staging"})).outcome == "accepted"
    bob = Identity("slack", "U_BOB", "Bob")
    again = await engine.respond(card.ref, bob, "reject", {"environment": "staging"})
    assert again.outcome == "already_decided"
    assert again.message.startswith("Already decided by Alice (Approve) at 2025-03-01 12:00")
    assert _audit(engine, "respond_already_decided") == 1


async def test_cancel_resumes_with_cancelled(db_url: str) -> None:
    engine, adapter, _, _, card = await _ask(db_url)
    stranger = Identity("slack", "U_EVE")
    assert (await engine.cancel(card.ref, stranger, "nope")).outcome == "rejected"
    res = await engine.cancel(card.ref, STARTER, "changed my mind")
    assert res.outcome == "accepted" and res.card is not None and res.card.status == "cancelled"
    await engine.run_worker_once()
    assert "changed my mind" in adapter.results[0][1]


async def test_all_deliveries_failing_resolves_unavailable(db_url: str) -> None:
    engine, adapter, _ = make_engine(db_url)
    adapter.fail_targets.add("*")
    await engine.start_run("deploy", "Deploy v9", STARTER, ORIGIN)
    with engine.db.transaction() as s:
        req = s.scalars(select(HumanRequest)).one()
        assert req.status == "unavailable"
        # The adapter gave no words: a neutral sentence, never its raw error text.
        assert (req.result or {})["message"] == (
            "The request could not be delivered to anyone. "
            "The chat platform refused the message.")
        failed = s.scalars(select(AuditLog).where(AuditLog.event == "outbox_failed")).one()
        assert "channel_not_found (C_OPS)" in (failed.reason or "")
    assert await engine.run_worker_once() == 1
    assert "not started" in adapter.results[0][1]


async def test_unknown_agent_and_unknown_ref(db_url: str) -> None:
    engine, _, _ = make_engine(db_url)
    with pytest.raises(UnknownAgentError, match=r"Unknown agent 'nope'.*deploy"):
        await engine.start_run("nope", "x", STARTER, ORIGIN)
    res = await engine.respond("no-such-ref", alice(), "approve", {})
    assert res.outcome == "not_found" and res.card is None
    assert _audit(engine, "respond_unknown_ref") == 1


async def test_lookups(db_url: str) -> None:
    engine, _, _, _, card = await _ask(db_url)
    assert await engine.find_by_message("slack", "m1") == card.ref
    assert await engine.find_by_message("slack", "m404") is None
    assert [c.ref for c in await engine.pending_for(alice())] == [card.ref]
    assert await engine.pending_for(Identity("slack", "U_EVE")) == []
    assert await engine.pending_for(STARTER) == []
    assert (await engine.card(card.ref)) is not None


async def test_card_for_message_reads_ref_and_card_together(db_url: str) -> None:
    engine, _, _, _, card = await _ask(db_url)
    found = await engine.card_for_message("slack", "m1")
    assert found is not None
    ref, current = found
    assert ref == card.ref and current == await engine.card(card.ref)
    assert await engine.card_for_message("slack", "m404") is None
    assert await engine.card_for_message("feishu", "m1") is None  # other platform


async def test_resume_retries_with_backoff_then_fails(db_url: str) -> None:
    from tests.engine.helpers import FORM_ARGS, AskingRuntime

    fake = AskingRuntime(FORM_ARGS, fail_resumes=99)
    engine, adapter, clock = make_engine(db_url, fake=fake, max_attempts=3, backoff_base=10)
    await engine.start_run("form", "go", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    assert (await engine.respond(ref, alice(), "reject", {"environment": "staging"})).ok
    assert await engine.run_worker_once() == 1
    assert await engine.run_worker_once() == 0  # backing off for 10 s
    clock.advance(10)
    assert await engine.run_worker_once() == 1
    clock.advance(19)
    assert await engine.run_worker_once() == 0  # second delay is 20 s
    clock.advance(1)
    assert await engine.run_worker_once() == 1
    assert len(fake.resumes) == 3
    assert await engine.job_states() == {"failed": 1}
    assert adapter.results[0][1].startswith("The run failed: resuming failed after 3")


async def test_resume_recovers_after_a_transient_error(db_url: str) -> None:
    from tests.engine.helpers import FORM_ARGS, AskingRuntime

    fake = AskingRuntime(FORM_ARGS, fail_resumes=1)
    engine, adapter, clock = make_engine(db_url, fake=fake)
    await engine.start_run("form", "go", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    await engine.respond(ref, alice(), "approve", {"environment": "staging", "amount": "12.5"})
    await engine.run_worker_once()
    clock.advance(60)
    await engine.run_worker_once()
    assert await engine.job_states() == {"done": 1}
    assert '"amount": 12.5' in adapter.results[0][1]
    with engine.db.transaction() as s:
        assert s.scalars(select(ResumeJob)).one().attempts == 2


def test_a_nameless_decider_from_another_platform_is_not_shown_as_a_raw_id() -> None:
    import datetime as dt

    from bot.engine.cards import already_decided_message

    request = HumanRequest(status="submitted", decided_by_platform="feishu",
                           decided_by_user="ou_4f1c9a", decided_by_name=None,
                           decided_at=dt.datetime(2025, 3, 1, 12, 0),
                           result={"action": {"id": "approve", "label": "Approve"}})
    on_slack = str(already_decided_message(request, "slack"))
    assert on_slack == "Already decided by someone on Feishu (Approve) at 2025-03-01 12:00 UTC."
    # Feishu itself turns its own open_ids into names before showing the text.
    assert "ou_4f1c9a" in str(already_decided_message(request, "feishu"))
    request.decided_by_name = "Alice Chen"
    assert "Alice Chen" in str(already_decided_message(request, "slack"))
