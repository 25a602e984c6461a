"""The click path under a burst: lookups without the write lock, group-committed
refusal audits and dedupe keys (``Committer.read`` / ``Committer.batched``)."""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import Any

import pytest
from sqlalchemy import func, select

from bot.engine import Identity, store
from storage import AuditLog, Database, ResumeJob, Vote
from tests.engine.helpers import ORIGIN, STARTER, make_engine

PEOPLE = [f"U{i}" for i in range(100)]
ROUTE: dict[str, Any] = {
    "timeout": "1h",
    "slack": {"channel": "C_OPS", "approvers": {"users": PEOPLE}},
}


def _count(engine: Any, *where: Any) -> int:
    with engine.db.transaction() as s:
        return int(s.scalar(select(func.count()).select_from(AuditLog).where(*where)) or 0)


def _occurrences(engine: Any, *where: Any) -> int:
    """Refusals counted on their aggregate rows (one row per event, person, request)."""
    with engine.db.transaction() as s:
        return int(s.scalar(select(func.sum(AuditLog.occurrences)).where(*where)) or 0)


async def test_hundred_clicks_one_decision_and_ninety_nine_audited_refusals(db_url: str) -> None:
    engine, adapter, _ = make_engine(db_url, route=ROUTE)
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    people = [Identity("slack", user, f"User {user}") for user in PEOPLE]
    results = await asyncio.gather(*(
        engine.respond(ref, p, "approve", {"environment": "staging"}) for p in people))
    outcomes = collections.Counter(r.outcome for r in results)
    assert outcomes == {"accepted": 1, "already_decided": 99}
    # Every answer came after its audit row was committed: no drain needed to see them.
    refused = (AuditLog.event.in_(["respond_already_decided"]), AuditLog.outcome == "refused")
    assert _count(engine, *refused) == 99
    assert _count(engine, AuditLog.event == "decided") == 1
    losers = {r.message for r in results if r.outcome == "already_decided"}
    assert len({m.split(" at ")[0] for m in losers}) == 1
    with engine.db.transaction() as s:
        assert s.scalar(select(func.count()).select_from(Vote)) == 1
        assert s.scalar(select(func.count()).select_from(ResumeJob)) == 1
        refused_actors = set(s.scalars(select(AuditLog.actor_user).where(*refused)))
    winner = next(r for r in results if r.outcome == "accepted")
    assert winner.card is not None and winner.card.decided_by_id not in refused_actors
    assert len(refused_actors) == 99


async def test_batched_writes_share_a_transaction_and_survive_cancelled_callers(
    db_url: str,
) -> None:
    engine, _, _ = make_engine(db_url)
    now = engine.now()
    commits = 0
    original = engine.db.transaction

    def counting() -> Any:
        nonlocal commits
        commits += 1
        return original()

    engine.db.transaction = counting  # type: ignore[method-assign]
    try:
        tasks = [asyncio.create_task(engine.committer.batched(lambda s, i=i: store.audit(
            s, now, "probe", outcome="refused", reason=f"r{i}"))) for i in range(30)]
        await asyncio.sleep(0)
        tasks[5].cancel()  # the caller gives up; its row must still be written
        await asyncio.gather(*tasks, return_exceptions=True)
        await engine.drain()
    finally:
        engine.db.transaction = original  # type: ignore[method-assign]
    assert _occurrences(engine, AuditLog.event == "probe") == 30
    assert commits < 30  # grouped, not one commit per row


async def test_a_failing_batched_step_fails_only_its_caller(db_url: str) -> None:
    engine, _, _ = make_engine(db_url)
    now = engine.now()

    def bad(_session: Any) -> None:
        raise ValueError("boom")

    calls = [engine.committer.batched(lambda s, i=i: store.audit(s, now, "probe", reason=f"r{i}"))
             for i in range(5)]
    results = await asyncio.gather(*calls[:2], engine.committer.batched(bad), *calls[2:],
                                   return_exceptions=True)
    assert isinstance(results[2], ValueError)
    assert [r for i, r in enumerate(results) if i != 2] == [None] * 5
    assert _count(engine, AuditLog.event == "probe") == 5


async def test_drain_flushes_queued_refusal_audits(db_url: str) -> None:
    """Shutdown (``serve``'s lifespan calls ``engine.drain``) loses no queued audit row,
    even one whose caller is not waiting for it any more."""
    engine, _, _ = make_engine(db_url)
    who = Identity("feishu", "ou_x")
    tasks = [asyncio.create_task(engine.audit_refusal("ref", who, f"late {i}", {"i": i}))
             for i in range(20)]
    await asyncio.sleep(0)
    for task in tasks:
        task.cancel()
    await engine.drain()
    assert _occurrences(engine, AuditLog.event == "adapter_refused") == 20


async def test_first_seen_in_one_batch_is_true_once(db_url: str) -> None:
    engine, _, _ = make_engine(db_url)
    verdicts = await asyncio.gather(*(engine.first_seen("feishu", k)
                                      for k in ["event:a", "event:a", "event:b", "event:a"]))
    assert verdicts == [True, False, True, False]


async def test_first_seen_chain_records_keys_in_order_until_a_repeat(db_url: str) -> None:
    engine, _, _ = make_engine(db_url)
    assert await engine.first_seen_chain("feishu", ["nonce:n1", "event:e1"]) == [True, True]
    # A replayed nonce stops the chain: the new event id after it is not recorded.
    assert await engine.first_seen_chain("feishu", ["nonce:n1", "event:e2"]) == [False]
    assert await engine.first_seen("feishu", "event:e2")
    # A new nonce with a known event id: the nonce is recorded, the event is a repeat.
    assert await engine.first_seen_chain("feishu", ["nonce:n2", "event:e1"]) == [True, False]
    assert not await engine.first_seen("feishu", "nonce:n2")
    assert await engine.first_seen_chain("slack", ["nonce:n1"]) == [True]  # per platform
    assert await engine.first_seen_chain("feishu", []) == []
    # Concurrent chains share batches; each key is new exactly once.
    verdicts = await asyncio.gather(*(engine.first_seen_chain("feishu", [f"nonce:c{i % 3}",
                                                                          "event:c"])
                                      for i in range(6)))
    assert sum(v == [True, True] for v in verdicts) == 1
    assert sum(v == [True, False] for v in verdicts) == 2
    assert sum(v == [False] for v in verdicts) == 3


def test_sqlite_read_does_not_wait_for_the_writer(tmp_path: Any) -> None:
    db = Database(f"sqlite:///{tmp_path / 'r.db'}")
    db.upgrade()
    writing, release = threading.Event(), threading.Event()

    def writer() -> None:
        with db.transaction() as s:
            store.audit(s, store_now(), "held")
            s.flush()
            writing.set()
            release.wait(10)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert writing.wait(10)
        with db.read() as s:  # would block for busy_timeout if it took the write lock
            assert s.scalar(select(func.count()).select_from(AuditLog)) == 0
    finally:
        release.set()
        thread.join()
    with db.read() as s:
        assert s.scalar(select(func.count()).select_from(AuditLog)) == 1
    db.dispose()


def store_now() -> Any:
    import datetime as dt

    return dt.datetime(2026, 1, 1)


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_in_memory_sqlite_keeps_no_pool(url: str) -> None:
    from sqlalchemy.pool import NullPool

    db = Database(url)
    assert isinstance(db.engine.pool, NullPool)
    db.dispose()
