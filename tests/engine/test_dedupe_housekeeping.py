"""Shared event dedupe, adapter refusals, stale card versions and table pruning.

Every test runs on SQLite and PostgreSQL (``db_url``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select, text

from bot.engine import DeliveryRef, Engine, Identity, housekeeping
from renderers.card import RequestCard
from storage import AuditLog, Database, OutboxItem, SeenEvent
from tests.engine.helpers import (
    FORM_ARGS,
    ORIGIN,
    STARTER,
    AskingRuntime,
    FakeAdapter,
    FakeClock,
    FakeDirectory,
    make_engine,
    scripted_runtimes,
)

QUORUM: dict[str, Any] = {
    "timeout": "30m", "quorum": 2,
    "slack": {"channel": "C_OPS", "approvers": {"users": ["U_A", "U_B"]}},
}
A, B = Identity("slack", "U_A", "A"), Identity("slack", "U_B", "B")
VALUES = {"environment": "staging"}


def _count(engine: Engine, model: Any, *where: Any) -> int:
    with engine.db.transaction() as s:
        return int(s.scalar(select(func.count()).select_from(model).where(*where)) or 0)


# ---------------------------------------------------------------- first_seen


async def test_first_seen_is_shared_by_engines_on_one_database(db_url: str) -> None:
    one, _, clock = make_engine(db_url)
    other_db = Database(db_url)  # a second replica: its own engine and connections
    other = Engine(other_db, one.settings, scripted_runtimes(), clock)
    try:
        verdicts = await asyncio.gather(*(
            engine.first_seen("slack", "event:Ev1") for engine in [one, other] * 4))
        assert sorted(verdicts) == [False] * 7 + [True]
        assert not await other.first_seen("slack", "event:Ev1")
        # Keys are per platform, and a new id is new everywhere.
        assert await other.first_seen("feishu", "event:Ev1")
        assert await one.first_seen("slack", "event:Ev2")
        long_key = "nonce:" + "x" * 600  # longer than the column: stored as a digest
        assert await one.first_seen("feishu", long_key)
        assert not await other.first_seen("feishu", long_key)
        assert _count(one, SeenEvent) == 4
    finally:
        other_db.dispose()
        one.db.dispose()


def test_mark_seen_many_writes_what_mark_seen_writes(db_url: str, monkeypatch: Any) -> None:
    """The group commit's dedupe statement (written for the driver, not built by Core):
    the new keys only, a key listed twice new once, long keys stored as digests, rows
    stored exactly as ``mark_seen`` stores them (the ORM reads them back alike), split
    into several statements when there are many keys."""
    engine, _, _ = make_engine(db_url)
    now = engine.now()
    long_key = "nonce:" + "y" * 600
    with engine.db.transaction() as s:
        assert housekeeping.mark_seen(s, now, "feishu", "event:one")
    monkeypatch.setattr(housekeeping, "SEEN_KEYS_PER_STATEMENT", 2)
    with engine.db.transaction() as s:
        fresh = housekeeping.mark_seen_many(
            s, now, "feishu", ["event:one", "event:two", long_key, "event:two", "nonce:3"])
    assert fresh == {"event:two", long_key, "nonce:3"}
    with engine.db.transaction() as s:
        assert housekeeping.mark_seen_many(s, now, "feishu", [long_key, "nonce:3"]) == set()
        assert housekeeping.mark_seen_many(s, now, "slack", ["nonce:3"]) == {"nonce:3"}
        assert housekeeping.mark_seen_many(s, now, "slack", []) == set()
        rows = {r.key: (r.platform, r.seen_at) for r in s.scalars(select(SeenEvent))}
        # As stored (SQLite keeps text): one form for the row Core wrote and the others.
        assert s.execute(text("SELECT count(DISTINCT seen_at) FROM seen_events")).scalar() == 1
    assert len(rows) == 5 and set(rows.values()) == {("feishu", rows["feishu:event:one"][1]),
                                                      ("slack", rows["feishu:event:one"][1])}
    assert housekeeping.seen_key("feishu", long_key) in rows
    assert rows["feishu:event:one"][1] == rows["feishu:event:two"][1]  # same stored form
    engine.db.dispose()


async def test_seen_events_are_pruned_after_their_retention(db_url: str) -> None:
    engine, _, clock = make_engine(db_url, seen_retention_seconds=3600,
                                   housekeeping_interval_seconds=600)
    assert await engine.first_seen("slack", "event:old")
    clock.advance(3000)
    assert await engine.first_seen("slack", "event:young")
    clock.advance(700)  # "old" is 3700 s old, "young" 700 s
    await engine.run_worker_once()
    with engine.db.transaction() as s:
        assert set(s.scalars(select(SeenEvent.key))) == {"slack:event:young"}
    assert await engine.first_seen("slack", "event:old")  # forgotten, so new again
    # The sweep prunes at most once per interval.
    clock.advance(3000)
    engine.housekeeping.last_run = engine.now()
    await engine.run_worker_once()
    assert _count(engine, SeenEvent) == 2
    engine.db.dispose()


# ---------------------------------------------------------------- audit_refusal


async def test_audit_refusal_writes_one_refused_row(db_url: str) -> None:
    engine, _, _ = make_engine(db_url)
    who = Identity("feishu", "ou_mallory")
    await engine.audit_refusal("r" * 100, who, "This card does not match its request.",
                               {"platform": "feishu", "check": "ref_mismatch"})
    await engine.audit_refusal(None, None, "Feishu callback refused: replayed nonce.",
                               {"check": "replayed_nonce"})
    with engine.db.transaction() as s:
        rows = list(s.scalars(select(AuditLog).order_by(AuditLog.id)))
    assert [(r.event, r.outcome) for r in rows] == [("adapter_refused", "refused")] * 2
    # A reference that names no request is kept in the details, not as the row's key.
    assert rows[0].request_ref is None
    assert (rows[0].actor_platform, rows[0].actor_user) == ("feishu", "ou_mallory")
    assert rows[0].details == {"platform": "feishu", "check": "ref_mismatch", "ref": "r" * 64}
    assert rows[1].actor_user is None and rows[1].request_ref is None
    engine.db.dispose()


# ---------------------------------------------------------------- stale card versions


@dataclass
class SlowAdapter(FakeAdapter):
    """Updates to version ``slow_version`` hang until ``gate`` opens; ``shown`` is what
    each message displays (the last update to *finish* wins, like a real platform)."""

    slow_version: int = 2
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    shown: dict[str, int] = field(default_factory=dict)

    async def update(self, card: RequestCard, ref: DeliveryRef) -> None:
        if card.version == self.slow_version and not self.gate.is_set():
            self.started.set()
            await self.gate.wait()
        self.updates.append((card, ref))
        self.shown[ref.message_id] = card.version


async def _quorum_request(db_url: str, **kw: Any) -> tuple[Engine, SlowAdapter, FakeClock, str]:
    engine, _, clock = make_engine(db_url, route=QUORUM, fake=AskingRuntime(FORM_ARGS), **kw)
    adapter = SlowAdapter()
    engine.register_adapter(adapter, FakeDirectory())
    await engine.start_run("form", "go", STARTER, ORIGIN)
    return engine, adapter, clock, adapter.delivered[0][0].ref


async def test_a_slow_older_update_never_leaves_an_older_version_showing(db_url: str) -> None:
    engine, adapter, _, ref = await _quorum_request(db_url)
    # A's vote (version 2): its card update hangs in the platform call.
    vote = asyncio.create_task(engine.respond(ref, A, "approve", VALUES))
    await asyncio.wait_for(adapter.started.wait(), 5)
    # B's vote decides (version 3); its card update finishes first.
    decided = await engine.respond(ref, B, "approve", VALUES)
    assert decided.outcome == "accepted" and decided.card is not None
    assert decided.card.version == 3
    assert adapter.shown == {"m1": 3}
    adapter.gate.set()  # the old update lands last...
    assert (await asyncio.wait_for(vote, 5)).outcome == "recorded"
    # ...and is followed by the newest version again.
    assert [c.version for c, _ in adapter.updates] == [3, 2, 3]
    assert adapter.shown == {"m1": 3}
    assert await engine.outbox_states() == {"done": 3}
    engine.db.dispose()


async def test_update_rows_skip_versions_a_copy_already_shows(db_url: str) -> None:
    engine, adapter, _clock, ref = await _quorum_request(db_url)
    adapter.gate.set()
    await engine.respond(ref, A, "approve", VALUES)
    await engine.respond(ref, B, "approve", VALUES)
    assert [c.version for c, _ in adapter.updates] == [2, 3]
    # A stale row (e.g. a retry of the version-2 update) comes around again.
    with engine.db.transaction() as s:
        request_id = s.scalars(select(OutboxItem.request_id)
                               .where(OutboxItem.kind == "update_card")).first()
        s.add(OutboxItem(kind="update_card", request_id=request_id, payload={
            "ref": ref, "version": 2}, state="queued", attempts=1,
            next_attempt_at=engine.now(), created_at=engine.now(), updated_at=engine.now()))
    await engine.run_worker_once()
    assert [c.version for c, _ in adapter.updates] == [2, 3]  # nothing re-sent
    assert _count(engine, OutboxItem, OutboxItem.kind == "update_card",
                  OutboxItem.state == "done") == 3
    engine.db.dispose()


# ---------------------------------------------------------------- outbox cleanup


async def test_done_outbox_rows_are_pruned_after_their_retention(db_url: str) -> None:
    clock = FakeClock()
    # The request must still be open six days later (answers after the deadline are refused).
    engine, adapter, _ = make_engine(db_url, clock=clock, route={**QUORUM, "timeout": "30d"},
                                     fake=AskingRuntime(FORM_ARGS),
                                     outbox_retention_seconds=7 * 86400)
    await engine.start_run("form", "go", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    assert (await engine.respond(ref, A, "approve", VALUES)).outcome == "recorded"
    with engine.db.transaction() as s:  # a row that must stay: it failed for good
        s.add(OutboxItem(kind="post_run_result", payload={}, state="failed", attempts=8,
                         next_attempt_at=engine.now(), created_at=engine.now(),
                         updated_at=engine.now()))
    assert await engine.outbox_states() == {"done": 2, "failed": 1}
    clock.advance(6 * 86400)
    assert (await engine.respond(ref, B, "approve", VALUES)).outcome == "accepted"
    clock.advance(86400 + 1)  # the first two rows are now older than 7 days
    pruned = await engine.prune_old()
    assert pruned["outbox_done"] == 2
    # The decision's card update (1 day old) and the failed row stay.
    states = await engine.outbox_states()
    assert states["failed"] == 1 and states["done"] >= 1
    with engine.db.transaction() as s:
        kinds = list(s.scalars(select(OutboxItem.kind).where(OutboxItem.state == "done")))
    assert "update_card" in kinds and "deliver_request" not in kinds
    engine.db.dispose()


async def test_worker_sweep_prunes_done_outbox_rows(db_url: str) -> None:
    clock = FakeClock()
    engine, _adapter, _ = make_engine(db_url, clock=clock, outbox_retention_seconds=60)
    await engine.start_run("deploy", "Deploy v1.2.3", STARTER, ORIGIN)
    assert await engine.outbox_states() == {"done": 1}
    clock.advance(61)
    await engine.run_worker_once()
    assert await engine.outbox_states() == {}
    engine.db.dispose()
