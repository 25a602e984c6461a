"""A click on a card whose delivery askhuman has not recorded yet waits; it is not
refused as an unknown card.

Feishu answers the post with the message id before askhuman writes the card's
``deliveries`` row (its own transaction; after a crash, the outbox's retry finds the
message again and writes it). A click in that window names a message askhuman does not
know. While the request's post is still queued or running that click is stored and
decided once the row exists; a message that is unknown with no post in flight is
still refused (``tests/feishu/test_replicas.py``).
"""

from __future__ import annotations

import asyncio
import datetime as dt

from sqlalchemy import delete, select, update

from storage import AuditLog, ClickInbox, Delivery, HumanRequest, OutboxItem
from tests.feishu.conftest import ALICE, Feishu, card_ref


async def _post_finished(f: Feishu, ref: str) -> None:
    """Wait for the post's outbox row to finish: its delivery row is written in one
    transaction and the row marked done in the next, and that mark must not land on
    top of the test's "still running" below."""
    for _ in range(500):
        with f.database.transaction() as session:
            states = session.scalars(select(OutboxItem.state).join(
                HumanRequest, HumanRequest.id == OutboxItem.request_id,
            ).where(HumanRequest.ref == ref, OutboxItem.kind == "deliver_request")).all()
        if states and all(state == "done" for state in states):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the post of {ref} did not finish: {states}")


def _unrecord_delivery(f: Feishu, ref: str) -> list[dict[str, object]]:
    """Put the request back in the window: card posted, delivery row not written yet,
    its post still running (leased far ahead, so no sweep retries it meanwhile)."""
    far = dt.datetime.now(dt.UTC).replace(tzinfo=None) + dt.timedelta(hours=1)
    with f.database.transaction() as session:
        request_id = session.scalar(select(HumanRequest.id).where(HumanRequest.ref == ref))
        rows = [{c.name: getattr(d, c.name) for c in Delivery.__table__.columns if c.name != "id"}
                for d in session.scalars(select(Delivery).where(Delivery.request_id == request_id))]
        session.execute(delete(Delivery).where(Delivery.request_id == request_id))
        session.execute(update(OutboxItem).where(
            OutboxItem.request_id == request_id, OutboxItem.kind == "deliver_request",
        ).values(state="running", lease_until=far, next_attempt_at=far))
    assert rows
    return rows


def _record_delivery(f: Feishu, rows: list[dict[str, object]]) -> None:
    """The post's own transaction commits: the row is written, the post is done."""
    with f.database.transaction() as session:
        for row in rows:
            session.add(Delivery(**row))
        session.execute(update(OutboxItem).where(
            OutboxItem.request_id == rows[0]["request_id"], OutboxItem.kind == "deliver_request",
        ).values(state="done", lease_until=None))


def _refusal_checks(f: Feishu) -> list[str]:
    with f.database.transaction() as session:
        return [str(r.details.get("check")) for r in session.scalars(
            select(AuditLog).where(AuditLog.event == "adapter_refused"))]


async def test_a_click_before_the_delivery_is_recorded_is_decided_after_it(
    feishu_http: Feishu,
) -> None:
    f = feishu_http
    await f.send_text("@_user_1 deploy: ship v9.0.1")
    card = await f.wait_card()
    ref = card_ref(card)
    await _post_finished(f, ref)
    rows = _unrecord_delivery(f, ref)

    response = await f.post_event(f.click_event(card, operator=ALICE))
    toast = response.json()["toast"]
    # Not "this is not a card of that request": the truth, in both languages.
    assert toast["type"] == "info" and "retry and tell you the outcome" in toast["content"]
    assert "重试" in toast["i18n"]["zh_cn"]
    await f.settle()
    assert await f.status(card) == "pending"
    assert _refusal_checks(f) == []
    with f.database.transaction() as session:
        [row] = session.scalars(select(ClickInbox)).all()
        assert row.state == "queued" and row.attempts >= 1  # waits for a retry

    _record_delivery(f, rows)
    with f.database.transaction() as session:  # its backoff is over
        session.execute(update(ClickInbox).values(next_attempt_at=dt.datetime(2000, 1, 1)))
    assert await f.engine.recover_clicks() == 1
    assert await f.status(card) == "submitted"
    assert _refusal_checks(f) == []
    assert any("Approve" in text for text in f.told(ALICE) + f.told_here(ALICE))


async def test_an_unknown_message_with_no_post_in_flight_is_still_refused(
    feishu_http: Feishu,
) -> None:
    f = feishu_http
    await f.send_text("@_user_1 deploy: ship v9.0.2")
    card = await f.wait_card()
    await _post_finished(f, card_ref(card))  # no post in flight any more
    event = f.click_event(card, operator=ALICE)
    event["event"]["context"]["open_message_id"] = "om_not_a_card"
    assert (await f.post_event(event)).json()["toast"]["type"] == "error"
    await f.settle()
    assert _refusal_checks(f) == ["unknown_message"]
    assert await f.status(card) == "pending"
