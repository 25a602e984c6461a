"""Retention: old answers and transcripts are redacted, old audit rows deleted, only when
configured and only once nothing needs them; refusals are counted, not piled up."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from bot.engine import Engine, Identity
from bot.settings import ConfigError, RetentionSettings, load_file
from storage import AuditLog, HumanRequest, OutboxItem, Run, StagedFile, Vote
from tests.engine.helpers import (
    FORM_ARGS,
    ORIGIN,
    STARTER,
    AskingRuntime,
    FakeClock,
    alice,
    make_engine,
)

SECRET_NOTE = "customer card ends 4242"
FILE = {"platform": "feishu", "id": "f1", "name": "a.log", "mimetype": "text/plain",
        "size": 10, "url": None}
DAY = 86400.0
MALLORY = Identity("slack", "U_MALLORY", "Mallory")


def retain(engine: Engine, **days: float) -> None:
    engine.settings = engine.settings.model_copy(update={"retention": RetentionSettings(
        **{key: value * DAY for key, value in days.items()})})


async def finished_run(db_url: str) -> tuple[Engine, FakeClock, str]:
    """A form run: files staged, answered with a secret note, resumed and finished."""
    engine, adapter, clock = make_engine(db_url, fake=AskingRuntime(FORM_ARGS),
                                         outbox_retention_seconds=3650 * DAY)
    await engine.start_run("form", f"refund order 77 ({SECRET_NOTE})", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    await engine.attach_files(ref, Identity("slack", "U_BOB", "Bob"), "logs", [FILE])
    answer = {"environment": "production", "amount": 42, "comment": SECRET_NOTE}
    assert (await engine.respond(ref, alice(), "approve", answer)).outcome == "accepted"
    await engine.run_worker_once()
    assert adapter.results and SECRET_NOTE in adapter.results[0][1]
    return engine, clock, ref


NOTHING = {"answers_redacted": 0, "transcripts_redacted": 0, "audit_deleted": 0}


def retention_counts(pruned: dict[str, int]) -> dict[str, int]:
    return {key: pruned[key] for key in NOTHING}


def everything(engine: Engine, outbox: bool = True) -> str:
    with engine.db.transaction() as s:
        rows: list[Any] = []
        models: tuple[Any, ...] = (Run, HumanRequest, Vote, StagedFile, AuditLog)
        for model in (*models, OutboxItem) if outbox else models:
            rows += [{c.name: getattr(r, c.key) for c in model.__table__.columns}
                     for r in s.scalars(select(model))]
    return json.dumps(rows, default=str)


async def test_nothing_is_purged_without_retention_settings(db_url: str) -> None:
    engine, clock, _ = await finished_run(db_url)
    before = everything(engine, outbox=False)
    clock.advance(3650 * DAY)
    assert retention_counts(await engine.prune_old()) == NOTHING
    assert everything(engine, outbox=False) == before and SECRET_NOTE in before


async def test_answers_and_transcripts_are_redacted_after_their_retention(
    db_url: str,
) -> None:
    engine, clock, ref = await finished_run(db_url)
    retain(engine, answers=90, transcripts=30)
    clock.advance(29 * DAY)
    assert (await engine.prune_old())["transcripts_redacted"] == 0
    clock.advance(2 * DAY)
    pruned = await engine.prune_old()
    assert (pruned["transcripts_redacted"], pruned["answers_redacted"]) == (1, 0)
    with engine.db.transaction() as s:
        run = s.scalars(select(Run)).one()
        assert (run.snapshot, run.output, run.redacted_at) == (None, None, engine.now())
        assert SECRET_NOTE not in run.prompt
        post = s.scalars(select(OutboxItem).where(OutboxItem.kind == "post_run_result")).one()
        assert SECRET_NOTE not in json.dumps(post.payload)
    clock.advance(60 * DAY)
    assert (await engine.prune_old())["answers_redacted"] == 1
    assert SECRET_NOTE not in everything(engine)
    card = await engine.card(ref)  # who decided what, and when, is still there
    assert card is not None and card.status == "submitted"
    assert (card.decided_by_id, card.action_id, card.values) == ("U_ALICE", "approve", {})
    with engine.db.transaction() as s:
        assert s.scalar(select(func.count()).select_from(StagedFile)) == 0
        assert [v.values for v in s.scalars(select(Vote))] == [{}]
    clock.advance(DAY)
    assert (await engine.prune_old())["answers_redacted"] == 0  # done once


async def test_live_requests_and_runs_are_never_redacted(db_url: str) -> None:
    # A deadline far enough out that the answer 10 days in is still on time.
    route = {"timeout": "30d",
             "slack": {"channel": "C_OPS", "approvers": {"users": ["U_ALICE", "U_BOB"]}}}
    engine, adapter, clock = make_engine(db_url, fake=AskingRuntime(FORM_ARGS), route=route)
    retain(engine, answers=1, transcripts=1)
    await engine.start_run("form", SECRET_NOTE, STARTER, ORIGIN)  # waiting for a human
    ref = adapter.delivered[0][0].ref
    clock.advance(10 * DAY)
    await engine.respond(ref, alice(), "approve", {"environment": "staging",
                                                   "comment": SECRET_NOTE})
    clock.advance(10 * DAY)  # decided long ago, but its resume has not run yet
    assert retention_counts(await engine.prune_old()) == NOTHING
    await engine.run_worker_once()  # the agent still gets the answer
    assert SECRET_NOTE in adapter.results[-1][1]


async def test_old_audit_rows_are_deleted(db_url: str) -> None:
    engine, clock, ref = await finished_run(db_url)
    retain(engine, audit=365)
    clock.advance(300 * DAY)
    await engine.respond(ref, MALLORY, "approve", {})  # a refusal, seen again later
    clock.advance(100 * DAY)
    await engine.respond(ref, MALLORY, "approve", {})
    assert (await engine.prune_old())["audit_deleted"] > 5
    with engine.db.transaction() as s:
        left = s.scalars(select(AuditLog)).all()
    assert [(a.event, a.occurrences) for a in left] == [("respond_already_decided", 2)]


async def test_a_refusal_flood_adds_one_row_per_person_and_request(db_url: str) -> None:
    engine, adapter, clock = make_engine(db_url)
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    first_seen = engine.now()
    results = await asyncio.gather(*(engine.respond(ref, MALLORY, "approve", {})
                                     for _ in range(150)))
    assert {r.outcome for r in results} == {"rejected"}
    clock.advance(60)
    await asyncio.gather(*(engine.respond(f"forged-{i}", MALLORY, "approve", {})
                           for i in range(150)))  # random refs add no rows either
    await engine.respond(ref, Identity("slack", "U_EVE"), "approve", {})
    with engine.db.transaction() as s:
        rows = s.scalars(select(AuditLog).where(AuditLog.outcome == "refused")
                         .order_by(AuditLog.id)).all()
    summary = [(r.event, r.actor_user, r.request_ref, r.occurrences) for r in rows]
    assert summary == [("respond_unauthorized", "U_MALLORY", ref, 150),
                       ("respond_unknown_ref", "U_MALLORY", None, 150),
                       ("respond_unauthorized", "U_EVE", ref, 1)]
    flood = rows[0]
    assert flood.created_at == first_seen and flood.last_seen_at == first_seen
    assert rows[1].details["ref"] == "forged-0" or rows[1].details["ref"].startswith("forged-")
    assert rows[1].last_seen_at == engine.now()


def test_retention_settings_parse_durations_and_name_bad_keys(tmp_path: Path) -> None:
    parsed = load_file(Path(__file__).resolve().parents[2] / "askhuman.example.yaml")
    assert parsed.retention == RetentionSettings(answers=90 * DAY, transcripts=30 * DAY,
                                                 audit=365 * DAY)
    bad = tmp_path / "bad.yaml"
    bad.write_text("retention: {answers: soon, forever: 1d}\n")
    with pytest.raises(ConfigError) as info:
        load_file(bad)
    assert any(p.startswith("retention.answers: write a duration") for p in info.value.problems)
    assert "retention.forever: unknown key; remove it or check its spelling" in info.value.problems
