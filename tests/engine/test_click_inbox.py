"""The click inbox: stored before the ack, decided exactly once, recovered after a crash;
the deadline checked inside the compare-and-set; worker loops that never wait on
each other (``bot.engine.clicks``, ``bot.engine.inbox``)."""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, func, select

from bot.agents.base import Outcome
from bot.askhuman.schema import AskHumanToolResult
from bot.engine import Engine, Identity, inbox
from bot.engine.clicks import DEFERRED, GAVE_UP, ClickWriter
from bot.engine.inbox import AlreadySeen, Click, ClickTooLarge
from renderers.words import Said
from storage import AuditLog, ClickInbox, HumanRequest, ResumeJob, Vote
from tests.engine.helpers import (
    ORIGIN,
    STARTER,
    FakeAdapter,
    FakeClock,
    FakeDirectory,
    alice,
    make_engine,
    scripted_runtimes,
)
from tests.fakes.sqlite_lock import hold_write_lock

VALUES = {"environment": "staging"}
CROWD = [f"U{i}" for i in range(20)]
CROWD_ROUTE: dict[str, Any] = {
    "timeout": "1h", "slack": {"channel": "C_OPS", "approvers": {"users": CROWD}}}


@dataclass
class TellingAdapter(FakeAdapter):
    """The fake adapter plus ``tell_clicker``, recording what each clicker was told."""

    told: list[tuple[str, dict[str, str], str]] = field(default_factory=list)
    tell_failures: int = 0

    async def tell_clicker(self, who: Identity, reply_to: Mapping[str, str],
                           words: Said) -> None:
        if self.tell_failures:
            self.tell_failures -= 1
            raise ConnectionError("slack is down")
        self.told.append((who.user_id, dict(reply_to), str(words)))


def _engine(db_url: str, **kw: Any) -> tuple[Engine, TellingAdapter, FakeClock]:
    engine, _, clock = make_engine(db_url, **kw)
    adapter = TellingAdapter()
    engine.register_adapter(adapter, FakeDirectory())
    return engine, adapter, clock


def _click(ref: str, who: Identity | None = None, action: str = "approve") -> Click:
    return Click("slack", ref, who or alice(), action, VALUES, reply_to={"channel": "C_OPS"})


def _count(engine: Engine, model: Any, *where: Any) -> int:
    with engine.db.transaction() as s:
        return int(s.scalar(select(func.count()).select_from(model).where(*where)) or 0)


def _rows(engine: Engine) -> list[tuple[str, str | None]]:
    with engine.db.transaction() as s:
        return [(r.state, r.outcome) for r in s.scalars(select(ClickInbox).order_by(ClickInbox.id))]


def _status(engine: Engine, ref: str) -> str:
    with engine.db.transaction() as s:
        return str(s.scalars(select(HumanRequest.status).where(HumanRequest.ref == ref)).one())


async def _request(engine: Engine, adapter: FakeAdapter) -> str:
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    return adapter.delivered[-1][0].ref


# ---------------------------------------------------------------- record, then decide


async def test_a_stored_click_is_decided_once_and_closed_with_its_decision(db_url: str) -> None:
    engine, adapter, _ = _engine(db_url)
    ref = await _request(engine, adapter)
    recorded = await engine.record_click(_click(ref))
    assert recorded is not None
    assert _rows(engine) == [("running", None)]  # stored before anything was decided
    answer = await engine.decide_click(recorded)
    assert answer.outcome == "accepted"
    assert _rows(engine) == [("done", "accepted")]
    assert _status(engine, ref) == "submitted"
    assert _count(engine, AuditLog, AuditLog.event == "decided") == 1
    # Deciding the same stored click again changes nothing: its row is no longer ours.
    again = await engine.decide_click(recorded)
    assert again.outcome == "recorded" and again.words == DEFERRED
    assert _count(engine, Vote) == 1 and _count(engine, ResumeJob) == 1
    assert await engine.recover_clicks() == 0
    assert adapter.told == []  # the live path tells its clicker itself


async def test_a_refused_click_closes_its_row_with_the_refusal(db_url: str) -> None:
    engine, adapter, _ = _engine(db_url)
    ref = await _request(engine, adapter)
    stranger = Identity("slack", "U_MALLORY", "Mallory")
    recorded = await engine.record_click(_click(ref, stranger))
    assert recorded is not None
    answer = await engine.decide_click(recorded)
    assert answer.outcome == "rejected"
    assert _rows(engine) == [("done", "rejected")]
    assert _count(engine, AuditLog, AuditLog.event == "respond_unauthorized") == 1
    assert _status(engine, ref) == "pending"


async def test_oversize_values_are_refused_before_anything_is_stored(db_url: str) -> None:
    engine, adapter, _ = _engine(db_url)
    ref = await _request(engine, adapter)
    huge = Click("slack", ref, alice(), "approve", {"comment": "x" * 300_000})
    with pytest.raises(ClickTooLarge, match="too large"):
        await engine.record_click(huge)
    assert _rows(engine) == []


async def test_concurrent_stored_clicks_still_give_one_decision(db_url: str) -> None:
    engine, adapter, _ = _engine(db_url, route=CROWD_ROUTE)
    ref = await _request(engine, adapter)
    people = [Identity("slack", u, u) for u in CROWD]

    async def click(who: Identity) -> str:
        recorded = await engine.record_click(_click(ref, who))
        assert recorded is not None
        return (await engine.decide_click(recorded)).outcome

    outcomes = collections.Counter(await asyncio.gather(*(click(p) for p in people)))
    assert outcomes == {"accepted": 1, "already_decided": 19}
    assert collections.Counter(_rows(engine)) == {
        ("done", "accepted"): 1, ("done", "already_decided"): 19}
    assert _count(engine, Vote) == 1 and _count(engine, ResumeJob) == 1


# ---------------------------------------------------------------- crash recovery


async def test_a_click_left_behind_is_decided_by_the_worker_and_the_clicker_told(
    db_url: str,
) -> None:
    engine, adapter, clock = _engine(db_url)
    ref = await _request(engine, adapter)
    assert await engine.record_click(_click(ref)) is not None  # ...and then the process died
    assert await engine.recover_clicks() == 0  # its holder's lease still runs
    assert _status(engine, ref) == "pending"
    clock.advance(engine.tuning.click_lease.total_seconds() + 1)
    assert await engine.recover_clicks() == 1
    assert _status(engine, ref) == "submitted"
    assert _rows(engine) == [("done", "accepted")]
    assert _count(engine, AuditLog, AuditLog.event == "decided") == 1
    assert adapter.told == [("U_ALICE", {"channel": "C_OPS"}, "Thanks, your answer (Approve) "
                             "was recorded.")]
    assert await engine.run_worker_once() == 1  # the agent resumes with the answer
    clock.advance(3600)
    assert await engine.recover_clicks() == 0
    assert len(adapter.told) == 1 and _count(engine, Vote) == 1


async def test_a_live_decision_after_a_takeover_rolls_back(db_url: str) -> None:
    """The listener stalled past its lease: the worker decides, the late live attempt
    changes nothing (the decision and the row's closing commit together or not at all)."""
    engine, adapter, clock = _engine(db_url)
    ref = await _request(engine, adapter)
    recorded = await engine.record_click(_click(ref))
    assert recorded is not None
    clock.advance(engine.tuning.click_lease.total_seconds() + 1)
    assert await engine.recover_clicks() == 1
    late = await engine.decide_click(recorded)
    assert late.outcome == "recorded" and late.words == DEFERRED
    assert _count(engine, AuditLog, AuditLog.event == "decided") == 1
    assert _count(engine, AuditLog, AuditLog.event == "respond_already_decided") == 0
    assert _rows(engine) == [("done", "accepted")]


async def test_telling_is_retried_and_deciding_gives_up_after_max_attempts(
    db_url: str,
) -> None:
    engine, adapter, clock = _engine(db_url)
    ref = await _request(engine, adapter)
    adapter.tell_failures = 1
    assert await engine.record_click(_click(ref)) is not None
    clock.advance(engine.tuning.click_lease.total_seconds() + 1)
    assert await engine.recover_clicks() == 1
    assert _rows(engine) == [("telling", "accepted")] and adapter.told == []
    clock.advance(60)
    assert await engine.recover_clicks() == 1
    assert _rows(engine) == [("done", "accepted")] and len(adapter.told) == 1
    assert _count(engine, AuditLog, AuditLog.event == "decided") == 1  # decided once

    # A click whose decision keeps failing is given up, audited, and its clicker told.
    other = await _request(engine, adapter)
    assert await engine.record_click(_click(other)) is not None

    async def broken(*_args: Any) -> Any:
        raise ConnectionError("directory unavailable")

    engine.decider.respond_stored = broken  # type: ignore[method-assign]
    for _ in range(engine.tuning.click_max_attempts + 1):
        clock.advance(3600)
        await engine.recover_clicks()
    assert _rows(engine)[-1] == ("failed", "failed")
    assert adapter.told[-1] == ("U_ALICE", {"channel": "C_OPS"}, str(GAVE_UP))
    assert _count(engine, AuditLog, AuditLog.event == "click_failed") == 1
    assert _status(engine, other) == "pending"


# ---------------------------------------------------------------- a busy database



async def test_a_click_the_database_cannot_take_in_time_is_not_stored(tmp_path: Path) -> None:
    path = tmp_path / "askhuman.db"
    engine, adapter, _ = _engine(f"sqlite:///{path}")
    ref = await _request(engine, adapter)
    held = threading.Event()
    locker = threading.Thread(target=hold_write_lock, args=(path, 2.0, held))
    locker.start()
    held.wait(5)
    started = time.monotonic()
    assert await engine.record_click(_click(ref), budget=0.8) is None
    assert time.monotonic() - started < 2.0  # the caller is answered within its budget
    await asyncio.to_thread(locker.join)
    await asyncio.sleep(0.2)
    await engine.drain()
    # Nothing was stored late (or what was is closed unused): nothing decides from it.
    assert all(state == "failed" for state, _ in _rows(engine))
    assert await engine.recover_clicks() == 0
    assert _status(engine, ref) == "pending" and _count(engine, Vote) == 0

    # A lock held for less than the budget only delays the click.
    held.clear()
    locker = threading.Thread(target=hold_write_lock, args=(path, 0.5, held))
    locker.start()
    held.wait(5)
    recorded = await engine.record_click(_click(ref), budget=2.5)
    await asyncio.to_thread(locker.join)
    assert recorded is not None
    assert (await engine.decide_click(recorded)).outcome == "accepted"
    engine.db.dispose()


def test_a_batch_of_clicks_is_stored_as_the_orm_would_store_it(db_url: str) -> None:
    """``insert_many`` (on SQLite one multi-row INSERT with ids it picks): each row
    reads back exactly, with the id handed back for it, also after the highest row was
    deleted and next to rows the ORM inserted."""
    engine, _, clock = _engine(db_url)
    now = clock()
    who = Identity("slack", "U1", "Ann <!channel>", team="T1", enterprise=None)
    clicks = [Click("slack", f"ref{i}", who, f"approve{i}",
                    {"env": "prod", "n": i, "nested": {"ü": [1, None, "x'y"]}},
                    reply_to={"channel": f"C{i}", "message": "1.2"}) for i in range(3)]
    rows = [inbox.new_row(c, now, engine.ctx.click_hold(), f"token{i}")
            for i, c in enumerate(clicks)]
    with engine.db.transaction() as session:
        first = inbox.insert_many(session, rows[:2])
    with engine.db.transaction() as session:
        session.execute(delete(ClickInbox).where(ClickInbox.id == first[-1]))
        session.add(ClickInbox(**inbox.new_row(clicks[0], now, engine.ctx.click_hold(),
                                               "orm")))
    with engine.db.transaction() as session:
        second = inbox.insert_many(session, rows[2:])
    assert len(set(first + second)) == 3
    with engine.db.transaction() as session:
        stored = {r.id: r for r in session.scalars(select(ClickInbox))}
    for row_id, row in zip([first[0], *second], [rows[0], rows[2]], strict=True):
        got = stored[row_id]
        assert got.claim_token == row["claim_token"] and got.values == row["values"]
        assert got.reply_to == row["reply_to"] and got.display_name == "Ann <!channel>"
        assert got.received_at.replace(tzinfo=None) == now.replace(tzinfo=None)
        assert got.lease_until is not None and got.state == "running"
    assert inbox.insert_many(engine.db.sessions(), []) == []
    engine.db.dispose()


async def test_a_click_stored_after_its_caller_gave_up_is_closed_unused(
        db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commit lands after the budget ran out (the clicker was told to click again):
    the row is closed unused, so nothing is ever decided from it."""
    engine, adapter, _ = _engine(db_url)
    ref = await _request(engine, adapter)
    slow_commit = ClickWriter._commit_each

    def commit_then_stall(self: ClickWriter, items: Any) -> Any:
        stored = slow_commit(self, items)  # durable now, but the caller stops waiting
        time.sleep(0.8)
        return stored

    monkeypatch.setattr(ClickWriter, "_commit_each", commit_then_stall)
    started = time.monotonic()
    assert await engine.record_click(_click(ref), budget=0.4) is None
    assert time.monotonic() - started < 0.7
    assert _rows(engine) == [("running", None)]  # stored, nobody acked it
    await asyncio.sleep(0.8)
    await engine.drain()
    assert _rows(engine) == [("failed", "abandoned")]
    assert await engine.recover_clicks() == 0
    assert _status(engine, ref) == "pending" and _count(engine, Vote) == 0
    monkeypatch.undo()
    recorded = await engine.record_click(_click(ref))  # the writer still works
    assert recorded is not None
    assert (await engine.decide_click(recorded)).outcome == "accepted"
    engine.db.dispose()


async def test_clicks_from_two_event_loops_are_each_answered_on_their_own(
        db_url: str) -> None:
    """One writer thread serves callers on different event loops (a test client and
    the server, say): each future is settled on the loop that created it."""
    engine, adapter, _ = _engine(db_url)
    refs = [await _request(engine, adapter) for _ in range(2)]

    def in_other_loop() -> Any:
        return asyncio.run(engine.record_click(_click(refs[1])))

    mine, theirs = await asyncio.gather(engine.record_click(_click(refs[0])),
                                        asyncio.to_thread(in_other_loop))
    assert mine is not None and theirs is not None and mine.mark.id != theirs.mark.id
    assert (await engine.decide_click(mine)).outcome == "accepted"
    engine.db.dispose()


# ---------------------------------------------------------------- the deadline


async def test_a_late_answer_is_refused_and_times_the_request_out(db_url: str) -> None:
    engine, adapter, clock = _engine(db_url)
    ref = await _request(engine, adapter)
    clock.advance(30 * 60 + 2)  # 2 s after the deadline; the sweep has not run
    answer = await engine.respond(ref, alice(), "approve", VALUES)
    assert answer.outcome == "already_decided"
    assert answer.message == "This request timed out at 2025-03-01 12:30 UTC."
    assert _status(engine, ref) == "timeout"
    with engine.db.transaction() as s:
        request = s.scalars(select(HumanRequest).where(HumanRequest.ref == ref)).one()
        assert request.result is not None and request.result["status"] == "timeout"
        events = list(s.scalars(select(AuditLog.event).order_by(AuditLog.id)))
    assert events[-2:] == ["timed_out", "respond_too_late"]
    assert _count(engine, ResumeJob) == 1 and _count(engine, Vote) == 0
    assert adapter.updates and adapter.updates[-1][0].status == "timeout"
    assert await engine.expire_due() == 0  # nothing left for the sweep
    # The agent gets Dify's timeout result.
    assert await engine.run_worker_once() == 1


async def test_a_late_stored_click_is_refused_in_the_compare_and_set(db_url: str) -> None:
    engine, adapter, clock = _engine(db_url)
    ref = await _request(engine, adapter)
    clock.advance(30 * 60)  # exactly at the deadline
    recorded = await engine.record_click(_click(ref))
    assert recorded is not None
    answer = await engine.decide_click(recorded)
    assert answer.outcome == "already_decided" and "timed out at" in answer.message
    assert _rows(engine) == [("done", "already_decided")]
    assert _status(engine, ref) == "timeout"


async def test_a_click_stored_before_the_deadline_counts(db_url: str) -> None:
    engine, adapter, clock = _engine(db_url)
    ref = await _request(engine, adapter)
    clock.advance(30 * 60 - 1)  # one second before the deadline
    assert await engine.record_click(_click(ref)) is not None  # ...then the process died
    clock.advance(engine.tuning.click_lease.total_seconds() + 1)
    assert await engine.expire_due() == 0  # the stored click is decided first
    assert await engine.recover_clicks() == 1
    assert _status(engine, ref) == "submitted"
    assert adapter.told[-1][2] == "Thanks, your answer (Approve) was recorded."


class HangingResume:
    """Asks like the scripted agent; its resume hangs (a slow model call)."""

    name = "deploy"

    def __init__(self) -> None:
        self.inner = scripted_runtimes()("deploy")
        self.resuming = asyncio.Event()

    async def run(self, prompt: str) -> Outcome:
        return await self.inner.run(prompt)

    async def resume(self, snapshot: Any, results: dict[str, AskHumanToolResult]) -> Outcome:
        self.resuming.set()
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")


async def test_a_slow_resume_does_not_delay_timeouts(sqlite_url: str) -> None:
    engine, adapter, clock = _engine(sqlite_url)
    slow = HangingResume()
    engine.runtimes.built["deploy"] = slow
    first = await _request(engine, adapter)
    assert (await engine.respond(first, alice(), "approve", VALUES)).outcome == "accepted"
    stop = asyncio.Event()
    worker = asyncio.create_task(engine.serve_forever(stop, poll_interval=0.05))
    await asyncio.wait_for(slow.resuming.wait(), 5)  # the worker is stuck in that resume
    second = await _request(engine, adapter)
    clock.advance(30 * 60 + 1)
    started = time.monotonic()
    while _status(engine, second) != "timeout":
        assert time.monotonic() - started < 2.0, "the timeout waited behind the resume"
        await asyncio.sleep(0.02)
    # The first resume is still stuck; the timed-out request's resume does not wait for
    # it: it is claimed into a free slot of the pool (worker.resume_concurrency).
    for _ in range(100):
        if await engine.job_states() == {"running": 2}:
            break
        await asyncio.sleep(0.02)
    assert await engine.job_states() == {"running": 2}
    stop.set()
    worker.cancel()
    with pytest.raises(asyncio.CancelledError):
        await worker



async def test_closed_clicks_are_pruned_after_the_retention(db_url: str) -> None:
    engine, adapter, clock = _engine(db_url, outbox_retention_seconds=86400)
    ref = await _request(engine, adapter)
    recorded = await engine.record_click(_click(ref))
    assert recorded is not None
    await engine.decide_click(recorded)
    other = await _request(engine, adapter)
    assert await engine.record_click(_click(other)) is not None  # never decided (yet)
    clock.advance(86400 + 1)
    assert (await engine.prune_old())["click_inbox"] == 1
    assert _rows(engine) == [("running", None)]  # an open click is never pruned


async def test_dedupe_keys_are_recorded_with_the_click(db_url: str) -> None:
    """``record_click(seen=…)``: a callback's nonce and event id go in with the click; a
    repeated nonce (a replay) or event id (a platform retry) stores nothing, and two
    concurrent clicks with the same event id store one."""
    engine, adapter, _ = _engine(db_url)
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    assert await engine.record_click(_click(ref), seen=["nonce:n1", "event:e1"]) is not None
    with pytest.raises(AlreadySeen) as replay:
        await engine.record_click(_click(ref), seen=["nonce:n1", "event:e2"])
    assert replay.value.key == "nonce:n1"
    with pytest.raises(AlreadySeen) as retry:
        await engine.record_click(_click(ref), seen=["nonce:n2", "event:e1"])
    assert retry.value.key == "event:e1"
    assert await engine.first_seen("slack", "event:e2")  # the replay stopped at its nonce
    assert not await engine.first_seen("slack", "nonce:n2")  # the retry's nonce was new
    both = await asyncio.gather(
        engine.record_click(_click(ref), seen=["nonce:n3", "event:e3"]),
        engine.record_click(_click(ref), seen=["nonce:n4", "event:e3"]),
        return_exceptions=True)
    assert sorted(type(r).__name__ for r in both) == ["AlreadySeen", "Recorded"]
    assert _count(engine, ClickInbox) == 2
