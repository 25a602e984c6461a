"""``card_rows``: the Core read of a card shows what the ORM load shows.

A click's access checks, a card update, a reminder and a card lookup by message read
the request as plain columns (``Cards.shown``); the rest loads ORM objects
(``Cards.load``). The two must agree on every column, the run's starter and the card
itself, in every state a card can be in: pending, part-way through a quorum (the
progress line), decided, escalated.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlalchemy.orm import Session

from bot.engine import Identity, card_rows, store
from bot.engine.card_rows import CardRow
from tests.engine.helpers import FORM_ARGS, ORIGIN, STARTER, AskingRuntime, make_engine

A, B = Identity("slack", "U_A", "Alice"), Identity("slack", "U_B", "Bob")
QUORUM = {"timeout": "30m", "quorum": 2,
          "slack": {"channel": "C_OPS", "approvers": {"users": ["U_A", "U_B"]}}}
VALUES = {"environment": "staging", "amount": 5}


def both(engine: Any, ref: str) -> tuple[Any, Any]:
    """``(Cards.shown, Cards.load)`` of ``ref`` in one snapshot."""
    with engine.db.transaction() as session:
        return engine.cards.shown(session, ref), engine.cards.load(session, ref)


def assert_same(engine: Any, ref: str) -> CardRow:
    shown, loaded = both(engine, ref)
    assert shown is not None and loaded is not None
    row, card = shown
    request, run, orm_card = loaded
    assert card == orm_card
    for field in dataclasses.fields(CardRow):
        if field.name == "votes":
            continue
        source = run if field.name == "agent" or field.name.startswith("started_by") \
            else request
        assert getattr(row, field.name) == getattr(source, field.name), field.name
    assert store.starter(row) == store.starter(run)
    return row


async def test_every_state_of_a_card_reads_the_same_as_the_orm_load(db_url: str) -> None:
    engine, adapter, _ = make_engine(db_url, route=QUORUM, fake=AskingRuntime(FORM_ARGS))
    await engine.start_run("form", "go", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    pending = assert_same(engine, ref)
    assert (pending.status, pending.votes, pending.result) == ("pending", 0, None)

    assert (await engine.respond(ref, A, "approve", VALUES)).outcome == "recorded"
    halfway = assert_same(engine, ref)
    assert halfway.votes == 1 and halfway.version > pending.version
    assert both(engine, ref)[0][1].responses == (("Alice", "Approve"),)

    assert (await engine.respond(ref, B, "approve", VALUES)).outcome == "accepted"
    decided = assert_same(engine, ref)
    assert decided.status == "submitted" and decided.decided_by_user == "U_B"
    assert decided.result is not None and decided.result["values"]["environment"] == "staging"
    engine.db.dispose()


async def test_unknown_and_oversize_refs_read_nothing(db_url: str) -> None:
    engine, _, _ = make_engine(db_url)
    for ref in ("", "nope", "x" * (store.MAX_REF_CHARS + 1)):
        assert both(engine, ref) == (None, None)
    engine.db.dispose()


async def test_copies_are_the_deliveries_oldest_first(db_url: str) -> None:
    engine, adapter, _ = make_engine(db_url, route=QUORUM, fake=AskingRuntime(FORM_ARGS))
    await engine.start_run("form", "go", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    with engine.db.transaction() as session:
        request = store.get_request(session, ref)
        assert request is not None
        rows = store.deliveries(session, request.id)
        found = card_rows.copies(session, request.id)
        assert [key for key, _ in found] == [str(d.id) for d in rows] and rows
        assert [(w.platform, w.channel, w.message_id) for _, w in found] == [
            (d.platform, d.channel, d.message_id) for d in rows]
        assert card_rows.copies(session, request.id + 1000) == []
    engine.db.dispose()


def _escalate(session: Session, ref: str) -> None:
    request = store.get_request(session, ref)
    assert request is not None
    request.escalated_routes = ["ops", "oncall"]
    request.escalation_route = "oncall"
    request.version += 1


async def test_an_escalated_request_reads_the_same(db_url: str) -> None:
    engine, adapter, _ = make_engine(db_url, fake=AskingRuntime(FORM_ARGS))
    await engine.start_run("form", "go", STARTER, ORIGIN)
    ref = adapter.delivered[0][0].ref
    with engine.db.transaction() as session:
        _escalate(session, ref)
    row = assert_same(engine, ref)
    assert row.escalated_routes == ["ops", "oncall"]
    assert both(engine, ref)[0][1].escalated_to == ("ops", "oncall")
    engine.db.dispose()
