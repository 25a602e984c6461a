"""``Batches`` (``bot.engine.batch``) without a platform: a batch is stored in one group
commit before anything is decided, each item is decided as a lone click, and a batch
left behind by a crash is decided by the worker, each clicker told."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

from bot.engine import Identity
from bot.engine.click_writer import ClickWriter
from storage import AuditLog, ClickInbox, HumanRequest
from tests.engine.batch_rows import api_client, ask_tool
from tests.engine.helpers import alice
from tests.engine.test_click_inbox import _engine


def _status(engine: Any, ref: str) -> str:
    with engine.db.transaction() as s:
        return str(s.scalars(select(HumanRequest.status).where(HumanRequest.ref == ref)).one())


def _count(engine: Any, model: Any, *where: Any) -> int:
    with engine.db.transaction() as s:
        return int(s.scalar(select(func.count()).select_from(model).where(*where)) or 0)


async def test_twenty_items_are_stored_in_one_commit_before_any_is_decided(
        db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    engine, _adapter, _ = _engine(db_url)
    client = api_client(engine, ["ops"])
    refs = [await ask_tool(engine, client, "ops", f"t{i}") for i in range(20)]
    commits: list[int] = []
    original = ClickWriter._commit

    def counted(self: ClickWriter, items: Any) -> Any:
        commits.append(len(items))
        return original(self, items)

    monkeypatch.setattr(ClickWriter, "_commit", counted)
    stored = await engine.record_batch(alice(), "approve", refs, None, {"channel": "C_OPS"})
    assert commits == [20] and len(stored.recorded) == 20 and not stored.not_stored
    assert _count(engine, ClickInbox, ClickInbox.state == "running") == 20
    assert all(_status(engine, r) == "pending" for r in refs)  # nothing decided yet
    result = await engine.decide_batch(stored)
    assert len(result.decided) == 20 and str(result.words) == "Approved 20."
    assert _count(engine, AuditLog, AuditLog.event == "decided") == 20
    assert _count(engine, AuditLog, AuditLog.event == "batch_decided") == 1


async def test_a_batch_left_behind_is_decided_by_the_worker_and_each_item_told(
        db_url: str) -> None:
    engine, adapter, clock = _engine(db_url)
    client = api_client(engine, ["ops"])
    refs = [await ask_tool(engine, client, "ops", f"t{i}") for i in range(2)]
    stored = await engine.record_batch(alice(), "approve", [*refs, "unknown-ref"], None,
                                       {"channel": "C_OPS"})
    assert len(stored.recorded) == 3  # ...and then the process died before deciding
    clock.advance(engine.tuning.click_lease.total_seconds() + 1)
    assert await engine.recover_clicks() == 3
    assert [_status(engine, r) for r in refs] == ["submitted", "submitted"]
    told = sorted(text for _, _, text in adapter.told)
    assert len(told) == 3 and told.count("Thanks, your answer (Approve) was recorded.") == 2
    assert _count(engine, AuditLog, AuditLog.event == "decided") == 2


async def test_malformed_and_repeated_refs_are_dropped_and_past_twenty_not_stored(
        db_url: str) -> None:
    engine, _adapter, _ = _engine(db_url)
    client = api_client(engine, ["ops"])
    refs = [await ask_tool(engine, client, "ops", f"t{i}") for i in range(21)]
    stored = await engine.record_batch(alice(), "reject", [refs[0], refs[0], "x" * 65, *refs],
                                       "no")
    assert len(stored.recorded) == 20 and stored.dropped == 1
    result = await engine.decide_batch(stored)
    assert len(result.decided) == 20 and _status(engine, refs[20]) == "pending"
    assert "1 more were not processed" in str(result.words)


async def test_on_a_quorum_route_the_batch_is_one_vote_per_request(db_url: str) -> None:
    route = {"timeout": "30m", "quorum": 2,
             "slack": {"channel": "C_OPS", "approvers": {"users": ["U_ALICE", "U_BOB"]}}}
    engine, _adapter, _ = _engine(db_url, route=route)
    client = api_client(engine, ["ops"])
    refs = [await ask_tool(engine, client, "ops", f"q{i}") for i in range(2)]
    first = await engine.decide_batch(await engine.record_batch(alice(), "approve", refs))
    assert len(first.voted) == 2 and not first.decided
    assert str(first.words).startswith("Approved 0. Your vote was counted on 2")
    again = await engine.decide_batch(await engine.record_batch(alice(), "approve", refs))
    assert len(again.refused) == 2  # the same person cannot vote twice
    bob = Identity("slack", "U_BOB", "Bob")
    last = await engine.decide_batch(await engine.record_batch(bob, "approve", refs))
    assert len(last.decided) == 2 and all(_status(engine, r) == "submitted" for r in refs)


async def test_an_item_past_its_deadline_is_refused_as_a_late_click_would_be(
        db_url: str) -> None:
    engine, _adapter, clock = _engine(db_url)
    ref = await ask_tool(engine, api_client(engine, ["ops"]), "ops", "late")
    clock.advance(31 * 60)  # the route's timeout is 30 minutes
    result = await engine.decide_batch(await engine.record_batch(alice(), "approve", [ref]))
    assert not result.decided and "timed out" in str(result.words)
    assert _status(engine, ref) == "timeout"
