"""Set-based expiry: every due request once, one resume per run step, cards queued."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import func, select

from bot import metrics
from bot.askhuman.schema import timeout_result
from bot.engine import audit_chain, expiry
from storage import AuditLog, HumanRequest, OutboxItem, ResumeJob
from tests.engine.expiry_seed import seed
from tests.engine.helpers import ORIGIN, STARTER, make_engine


def _count(engine: Any, model: Any, *where: Any) -> int:
    with engine.db.transaction() as s:
        return int(s.scalar(select(func.count()).select_from(model).where(*where)) or 0)


async def test_a_big_sweep_times_out_each_request_once(db_url: str) -> None:
    engine, _, clock = make_engine(db_url)
    n = expiry.CHUNK + 150  # more than one chunk
    seed(engine.db, engine.now(), [(f"run{i}", None, 10) for i in range(n)]
         + [("later", None, 60), ("never", None, None)])
    assert await engine.expire_due() == 0
    clock.advance(11 * 60)
    assert await engine.expire_due() == n
    assert _count(engine, HumanRequest, HumanRequest.status == "timeout") == n
    with engine.db.transaction() as s:
        results = set(map(str, s.scalars(select(HumanRequest.result)
                                         .where(HumanRequest.status == "timeout"))))
        versions = set(s.scalars(select(HumanRequest.version)
                                 .where(HumanRequest.status == "timeout")))
    assert results == {str(timeout_result().model_dump(mode="json"))} and versions == {2}
    assert _count(engine, ResumeJob) == n
    assert _count(engine, OutboxItem, OutboxItem.kind == "update_card",
                  OutboxItem.state == "queued") == n
    assert _count(engine, AuditLog, AuditLog.event == "timed_out") == n
    assert _count(engine, HumanRequest, HumanRequest.status == "pending") == 2
    assert await engine.expire_due() == 0  # nothing twice


async def test_a_run_step_resumes_once_after_its_last_request(db_url: str) -> None:
    engine, _, clock = make_engine(db_url)
    seed(engine.db, engine.now(), [
        ("both", "b1", 10), ("both", "b1", 10),  # expire together: one resume
        ("split", "b2", 10), ("split", "b2", None),  # a sibling still pending: none yet
        ("mixed", "b3", 10), ("mixed", "b3", 30),  # expire in two sweeps: one, at the end
    ])
    clock.advance(11 * 60)
    assert await engine.expire_due() == 4
    with engine.db.transaction() as s:
        assert list(s.scalars(select(ResumeJob.run_id))) == ["both"]
    clock.advance(20 * 60)
    assert await engine.expire_due() == 1
    with engine.db.transaction() as s:
        assert sorted(s.scalars(select(ResumeJob.run_id))) == ["both", "mixed"]


async def test_concurrent_sweeps_decide_each_request_once(db_url: str) -> None:
    engine, _, clock = make_engine(db_url)
    other, _, _ = make_engine(db_url, clock=clock)  # a second replica on the same database
    seed(engine.db, engine.now(), [(f"run{i}", None, 10) for i in range(600)])
    clock.advance(11 * 60)
    counts = await asyncio.gather(engine.expire_due(), other.expire_due(), engine.expire_due())
    assert sum(counts) == 600
    assert _count(engine, ResumeJob) == 600
    assert _count(engine, AuditLog, AuditLog.event == "timed_out") == 600


async def test_the_outbox_loop_updates_every_timed_out_card_once(db_url: str) -> None:
    engine, adapter, clock = make_engine(db_url)
    for i in range(60):  # more than one outbox round (50)
        await engine.start_run("deploy", f"Deploy v4.{i}", STARTER, ORIGIN)
    clock.advance(30 * 60 + 1)
    assert await engine.expire_due() == 60
    assert adapter.updates == []  # queued, not sent inline
    await engine.outbox_round()
    refs = [card.ref for card, _ in adapter.updates]
    assert len(refs) == 60 and len(set(refs)) == 60
    assert {card.status for card, _ in adapter.updates} == {"timeout"}
    assert _count(engine, OutboxItem, OutboxItem.kind == "update_card",
                  OutboxItem.state != "done") == 0


async def test_the_decision_histogram_counts_each_timeout_once(db_url: str) -> None:
    """The sweep's timeouts are decisions too: ``askhuman_time_to_decision_seconds``
    observes each once, with its route and how long it waited (the alerts and the
    dashboard read it by outcome)."""
    engine, _, clock = make_engine(db_url)
    seed(engine.db, engine.now(), [(f"h{i}", None, 10) for i in range(3)], prefix="hist")

    def sample(name: str) -> float:
        return sum(s.value for family in metrics.TIME_TO_DECISION.collect()
                   for s in family.samples if s.name == name
                   and s.labels == {"route": "ops", "outcome": "timeout"})

    def count() -> float:
        return sample("askhuman_time_to_decision_seconds_count")

    def total() -> float:
        return sample("askhuman_time_to_decision_seconds_sum")

    before, waited = count(), total()
    clock.advance(11 * 60)
    assert await engine.expire_due() == 3
    assert count() == before + 3
    assert total() - waited >= 3 * 11 * 60  # each waited its eleven minutes
    assert await engine.expire_due() == 0 and count() == before + 3  # never twice


async def test_a_chunk_writes_exactly_the_rows_of_a_timeout(
        db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep writes its audit, resume and card-update rows with ``INSERT … SELECT``
    from the requests it timed out: each request gets exactly the rows the one-at-a-time
    path would give it, column by column, and the audit chain seals and verifies them."""
    monkeypatch.setattr(expiry, "CHUNK", 3)  # two chunks
    engine, _, clock = make_engine(db_url)
    seed(engine.db, engine.now(), [(f"run{i}", None, 10) for i in range(5)], prefix="row")
    clock.advance(11 * 60)
    now = engine.now()
    assert await engine.expire_due() == 5
    message = timeout_result().message
    with engine.db.transaction() as s:
        requests = {r.id: r for r in s.scalars(select(HumanRequest))}
        audits = s.scalars(select(AuditLog).where(AuditLog.event == "timed_out")).all()
        jobs = s.scalars(select(ResumeJob)).all()
        cards = s.scalars(select(OutboxItem)).all()
    assert sorted(a.request_ref for a in audits) == sorted(r.ref for r in requests.values())
    for audit in audits:
        request = next(r for r in requests.values() if r.ref == audit.request_ref)
        assert (audit.created_at, audit.outcome, audit.run_id, audit.actor_platform,
                audit.actor_user, audit.reason, audit.details, audit.occurrences,
                audit.last_seen_at, audit.aggregate_key) == (
            now, "ok", request.run_id, None, None, message, {}, 1, None, None)
    assert sorted(j.request_id for j in jobs) == sorted(requests)
    for job in jobs:
        assert (job.run_id, job.state, job.attempts, job.next_attempt_at, job.lease_until,
                job.claim_token, job.holder, job.last_error, job.created_at,
                job.updated_at) == (requests[job.request_id].run_id, "queued", 0, now,
                                    None, None, None, None, now, now)
    assert sorted(c.request_id for c in cards) == sorted(requests)
    for card in cards:
        request = requests[card.request_id]
        assert (card.kind, card.run_id, card.platform, card.payload, card.state,
                card.attempts, card.next_attempt_at, card.lease_until, card.claim_token,
                card.holder, card.last_error, card.created_at, card.updated_at) == (
            "update_card", request.run_id, None, {"ref": request.ref, "version": 2},
            "queued", 0, now, None, None, None, None, now, now)
    await engine.seal_audit()
    with engine.db.transaction() as s:
        verdict = audit_chain.verify(s)
    assert verdict.ok and verdict.checked >= 5 and verdict.unsealed == 0
