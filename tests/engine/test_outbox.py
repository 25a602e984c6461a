"""The outbox: side effects after a commit survive transient failures and crashes.

Every test runs on SQLite and PostgreSQL. "Crash" means the process died right after
the state change committed and before the platform was told: the immediate dispatch is
replaced by something that raises a ``BaseException`` (like a kill, nothing in the
engine catches it), then a fresh ``Engine`` on the same database has to finish the job.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import func, select

from bot.engine import DeliveryRef, DeliveryTarget, Engine, Origin, PostKey
from renderers.card import RequestCard
from storage import AuditLog, HumanRequest, OutboxItem, Run
from tests.engine.helpers import (
    ORIGIN,
    STARTER,
    FakeAdapter,
    FakeClock,
    FakeDirectory,
    alice,
    make_engine,
)

LEASE = 30.0  # the Engine's default outbox lease
DEPLOYED = "Deployed v1.2.3 to production. Health checks are green."
TWO_TARGETS: dict[str, Any] = {
    "timeout": "30m",
    "slack": {"channel": "C_OPS", "users": ["U_DM"],
              "approvers": {"users": ["U_ALICE", "U_BOB"]}},
}


class Crash(BaseException):
    """The process died (nothing in the engine may catch this)."""


@dataclass
class FlakyAdapter(FakeAdapter):
    """A fake platform whose calls fail transiently the first N times."""

    fail_deliver: int = 0
    fail_update: int = 0
    fail_post: int = 0
    flaky_targets: set[str] = field(default_factory=set)
    """Only these targets fail on deliver (empty: all of them)."""

    async def deliver(self, card: RequestCard, target: DeliveryTarget,
                      key: PostKey | None = None) -> DeliveryRef:
        flaky = not self.flaky_targets or target.id in self.flaky_targets
        if self.fail_deliver and flaky:
            self.fail_deliver -= 1
            raise ConnectionError("connection reset by peer")
        return await super().deliver(card, target, key)

    async def update(self, card: RequestCard, ref: DeliveryRef) -> None:
        if self.fail_update:
            self.fail_update -= 1
            raise RuntimeError("slack is having a moment")
        await super().update(card, ref)

    async def post_run_result(self, origin: Origin, text: str,
                              key: PostKey | None = None) -> None:
        if self.fail_post:
            self.fail_post -= 1
            raise TimeoutError("read timed out")
        await super().post_run_result(origin, text, key)


def _flaky(db_url: str, clock: FakeClock | None = None, **kwargs: Any
           ) -> tuple[Engine, FlakyAdapter, FakeClock]:
    engine, _, clock = make_engine(db_url, clock=clock, **kwargs)
    adapter = FlakyAdapter()
    engine.register_adapter(adapter, FakeDirectory())
    return engine, adapter, clock


def _crash_after_commit(engine: Engine) -> None:
    async def die(claim: Any) -> None:
        raise Crash

    engine.outbox.dispatch = die  # type: ignore[method-assign]


def _count(engine: Engine, model: Any, *where: Any) -> int:
    with engine.db.transaction() as s:
        return int(s.scalar(select(func.count()).select_from(model).where(*where)) or 0)


def _audits(engine: Engine, event: str) -> int:
    return _count(engine, AuditLog, AuditLog.event == event)


def _status(engine: Engine) -> str:
    with engine.db.transaction() as s:
        return s.scalars(select(HumanRequest)).one().status


# ---------------------------------------------------------------- transient failures


async def test_transient_delivery_failure_is_delivered_by_the_next_sweep(db_url: str) -> None:
    engine, adapter, clock = _flaky(db_url)
    adapter.fail_deliver = 1
    await engine.start_run("deploy", "Deploy v1.2.3", STARTER, ORIGIN)
    assert adapter.delivered == [] and _status(engine) == "pending"
    assert await engine.outbox_states() == {"queued": 1}
    assert _audits(engine, "outbox_retry") == 1
    await engine.run_worker_once()
    assert adapter.delivered == []  # backing off for 2 s
    clock.advance(2)
    await engine.run_worker_once()
    assert [t.id for _, t in adapter.delivered] == ["C_OPS"]
    assert await engine.outbox_states() == {"done": 1}
    ref = adapter.delivered[0][0].ref
    assert await engine.find_by_message("slack", "m1") == ref
    assert (await engine.respond(ref, alice(), "approve", {"environment": "staging"})).ok


async def test_retry_posts_only_to_targets_that_lack_the_card(db_url: str) -> None:
    engine, adapter, clock = _flaky(db_url, route=TWO_TARGETS)
    adapter.fail_deliver, adapter.flaky_targets = 1, {"U_DM"}
    await engine.start_run("deploy", "Deploy v1.2.3", STARTER, ORIGIN)
    assert [t.id for _, t in adapter.delivered] == ["C_OPS"]
    clock.advance(2)
    await engine.run_worker_once()
    assert [t.id for _, t in adapter.delivered] == ["C_OPS", "U_DM"]
    clock.advance(3600)
    await engine.run_worker_once()
    assert len(adapter.delivered) == 2


async def test_failed_for_good_targets_are_not_retried(db_url: str) -> None:
    engine, adapter, clock = _flaky(db_url, route=TWO_TARGETS)
    adapter.fail_targets = {"C_OPS"}  # DeliveryError: permanent
    adapter.fail_deliver, adapter.flaky_targets = 1, {"U_DM"}
    await engine.start_run("deploy", "Deploy v1.2.3", STARTER, ORIGIN)
    adapter.fail_targets = set()  # would succeed now, but a permanent failure is final
    clock.advance(2)
    await engine.run_worker_once()
    assert [t.id for _, t in adapter.delivered] == ["U_DM"]
    assert _status(engine) == "pending"


async def test_exhausted_delivery_retries_resolve_unavailable(db_url: str) -> None:
    engine, adapter, clock = _flaky(db_url, outbox_max_attempts=2)
    adapter.fail_deliver = 99
    await engine.start_run("deploy", "Deploy v1.2.3", STARTER, ORIGIN)
    assert _status(engine) == "pending"
    clock.advance(2)
    assert await engine.run_worker_once() == 1  # gave up → unavailable → resumed
    assert _status(engine) == "unavailable"
    assert _audits(engine, "outbox_failed") == 1 and _audits(engine, "unavailable") == 1
    assert "not started" in adapter.results[0][1]
    with engine.db.transaction() as s:
        result = s.scalars(select(HumanRequest)).one().result or {}
    assert "connection reset by peer" not in result["message"]  # words, not raw errors
    assert result["message"].startswith("The request could not be delivered to anyone.")
    with engine.db.transaction() as s:
        failed = s.scalars(select(AuditLog).where(AuditLog.event == "outbox_failed")).one()
        assert "connection reset by peer" in (failed.reason or "")


async def test_card_update_after_a_decision_is_retried(db_url: str) -> None:
    engine, adapter, clock = _flaky(db_url)
    await engine.start_run("deploy", "Deploy v1.2.3", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    adapter.fail_update = 1
    result = await engine.respond(ref, alice(), "approve", {"environment": "production"})
    assert result.outcome == "accepted" and adapter.updates == []
    clock.advance(2)
    assert await engine.run_worker_once() == 1  # the resume; the card update is swept too
    assert [(c.status, r.message_id) for c, r in adapter.updates] == [("submitted", "m1")]
    assert adapter.results == [(ORIGIN, DEPLOYED)]
    assert await engine.outbox_states() == {"done": 3}


async def test_run_result_post_is_retried(db_url: str) -> None:
    engine, adapter, clock = _flaky(db_url)
    await engine.start_run("deploy", "Deploy v1.2.3", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    await engine.respond(ref, alice(), "approve", {"environment": "production"})
    adapter.fail_post = 2
    assert await engine.run_worker_once() == 1
    assert adapter.results == []
    clock.advance(2)
    await engine.run_worker_once()
    assert adapter.results == []
    clock.advance(4)
    await engine.run_worker_once()
    assert adapter.results == [(ORIGIN, DEPLOYED)]
    assert _audits(engine, "outbox_retry") == 2
    clock.advance(3600)
    await engine.run_worker_once()
    assert len(adapter.results) == 1


async def test_no_duplicates_when_the_immediate_attempt_succeeded(db_url: str) -> None:
    engine, adapter, clock = make_engine(db_url)
    await engine.start_run("deploy", "Deploy v1.2.3", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    await engine.respond(ref, alice(), "approve", {"environment": "production"})
    assert await engine.run_worker_once() == 1
    seen = (len(adapter.delivered), len(adapter.updates), len(adapter.results))
    assert seen == (1, 1, 1)
    for _ in range(3):
        clock.advance(3600)
        assert await engine.run_worker_once() == 0
    assert (len(adapter.delivered), len(adapter.updates), len(adapter.results)) == seen
    assert await engine.outbox_states() == {"done": 3}
    assert _audits(engine, "outbox_retry") == 0


async def test_copy_posted_while_the_request_was_decided_is_updated(db_url: str) -> None:
    engine, adapter, _ = _flaky(db_url, route=TWO_TARGETS)
    plain_deliver = adapter.deliver

    async def decide_meanwhile(card: RequestCard, target: DeliveryTarget,
                               key: PostKey | None = None) -> DeliveryRef:
        if target.id == "U_DM":  # Alice answers in the channel while the DM is in flight
            await engine.respond(card.ref, alice(), "approve", {"environment": "staging"})
        return await plain_deliver(card, target, key)

    adapter.deliver = decide_meanwhile  # type: ignore[method-assign]
    await engine.start_run("deploy", "Deploy v1.2.3", STARTER, ORIGIN)
    assert [(c.status, r.channel) for c, r in adapter.updates][-2:] == [
        ("submitted", "C_OPS"), ("submitted", "U_DM")]


# ---------------------------------------------------------------- crashes after commit


async def test_crash_before_delivery_is_delivered_once_by_another_engine(db_url: str) -> None:
    engine, _, clock = make_engine(db_url)
    _crash_after_commit(engine)
    with pytest.raises(Crash):
        await engine.start_run("deploy", "Deploy v1.2.3", STARTER, ORIGIN)
    assert _status(engine) == "pending"

    other, adapter, _ = make_engine(db_url, clock=clock)
    assert await other.run_worker_once() == 0
    assert adapter.delivered == []  # the dead process's lease still holds
    clock.advance(LEASE + 1)
    await other.run_worker_once()
    assert [t.id for _, t in adapter.delivered] == ["C_OPS"]
    clock.advance(3600)
    await other.run_worker_once()
    assert len(adapter.delivered) == 1
    assert await other.outbox_states() == {"done": 1}


async def test_crash_after_a_decision_updates_the_card_once(db_url: str) -> None:
    engine, first, clock = make_engine(db_url)
    await engine.start_run("deploy", "Deploy v1.2.3", STARTER, ORIGIN)
    ref = first.delivered[0][0].ref
    _crash_after_commit(engine)
    with pytest.raises(Crash):
        await engine.respond(ref, alice(), "approve", {"environment": "production"})
    assert _status(engine) == "submitted" and first.updates == []

    other, adapter, _ = make_engine(db_url, clock=clock)
    clock.advance(LEASE + 1)
    assert await other.run_worker_once() == 1
    assert [(c.status, c.decided_by_name, r.message_id) for c, r in adapter.updates] == [
        ("submitted", "Alice", "m1")]
    assert adapter.results == [(ORIGIN, DEPLOYED)]
    clock.advance(3600)
    assert await other.run_worker_once() == 0
    assert len(adapter.updates) == 1 and len(adapter.results) == 1


async def test_crash_after_the_resume_commit_posts_the_result_once(db_url: str) -> None:
    engine, first, clock = make_engine(db_url)
    run_id = await engine.start_run("deploy", "Deploy v1.2.3", STARTER, ORIGIN)
    ref = first.delivered[0][0].ref
    await engine.respond(ref, alice(), "approve", {"environment": "production"})
    _crash_after_commit(engine)
    with pytest.raises(Crash):
        await engine.run_worker_once()
    assert first.results == [] and await engine.job_states() == {"done": 1}

    other, adapter, _ = make_engine(db_url, clock=clock)
    clock.advance(LEASE + 1)
    assert await other.run_worker_once() == 0  # no second resume ...
    assert adapter.results == [(ORIGIN, DEPLOYED)]  # ... but the answer is posted
    clock.advance(3600)
    await other.run_worker_once()
    assert len(adapter.results) == 1 and _audits(other, "resumed") == 1
    with other.db.transaction() as s:
        run = s.get(Run, run_id)
        assert run is not None and run.status == "succeeded"


async def test_crash_after_a_resume_asks_again_delivers_the_follow_up(db_url: str) -> None:
    from tests.engine.helpers import FORM_ARGS

    engine, first, clock = make_engine(db_url, fake=_AskTwice(FORM_ARGS))
    await engine.start_run("form", "go", STARTER, ORIGIN)
    ref = first.delivered[0][0].ref
    await engine.respond(ref, alice(), "approve", {"environment": "staging"})
    _crash_after_commit(engine)
    with pytest.raises(Crash):
        await engine.run_worker_once()
    assert len(first.delivered) == 1

    other, adapter, _ = make_engine(db_url, clock=clock, fake=_AskTwice(FORM_ARGS))
    clock.advance(LEASE + 1)
    await other.run_worker_once()
    assert len(adapter.delivered) == 1 and adapter.delivered[0][0].ref != ref
    assert _count(other, HumanRequest, HumanRequest.status == "pending") == 1


async def test_two_engines_sweeping_at_once_deliver_once(db_url: str) -> None:
    engine, _, clock = make_engine(db_url)
    _crash_after_commit(engine)
    for n in range(3):
        with pytest.raises(Crash):
            await engine.start_run("deploy", f"Deploy v{n}", STARTER, ORIGIN)
    engines = [make_engine(db_url, clock=clock) for _ in range(2)]
    clock.advance(LEASE + 1)
    await asyncio.gather(*(e.run_worker_once() for e, _, _ in engines))
    delivered = [card.ref for _, adapter, _ in engines for card, _ in adapter.delivered]
    assert len(delivered) == len(set(delivered)) == 3
    assert _count(engine, OutboxItem, OutboxItem.state == "done") == 3


class _AskTwice:
    """Asks with ``args``, and once more after the first answer; then finishes."""

    name = "fake"

    def __init__(self, args: dict[str, Any]) -> None:
        from tests.engine.helpers import AskingRuntime

        self.inner = AskingRuntime(args)

    async def run(self, prompt: str) -> Any:
        return await self.inner.run(prompt)

    async def resume(self, snapshot: dict[str, Any], results: dict[str, Any]) -> Any:
        if snapshot.get("asked_twice"):
            return await self.inner.resume(snapshot, results)
        outcome = await self.inner.run("again")
        assert outcome.deferred_call is not None
        return type(outcome).asking(outcome.deferred_call, {**snapshot, "asked_twice": True})


async def test_a_caller_that_goes_away_does_not_cancel_a_committed_card_update(
        db_url: str) -> None:
    """The post-commit try runs in a task of its own: cancelling the caller (a client that
    hung up) leaves the committed card update to finish, instead of waiting a lease."""
    engine, adapter, _clock = make_engine(db_url)
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    started, gate = asyncio.Event(), asyncio.Event()
    update = adapter.update

    async def slow_update(card: Any, where: Any) -> None:
        started.set()
        await gate.wait()
        await update(card, where)

    adapter.update = slow_update  # type: ignore[method-assign]
    answer = asyncio.create_task(engine.respond(ref, alice(), "approve",
                                                {"environment": "production"}))
    await asyncio.wait_for(started.wait(), 10)
    answer.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await answer
    gate.set()
    await engine.drain()
    assert [card.status for card, _ in adapter.updates] == ["submitted"]
    assert await engine.outbox_states() == {"done": 2}  # the delivery and the update
