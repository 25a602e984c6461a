"""A click names the message it came from; the engine checks that message is a card of
the request the click claims. A process remembers each card's message once found
(``bot.engine.card_messages``): a race's losers on one card do not read it again, and the
check itself stays as strict (a remembered message claiming another ref is refused)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event, select

from bot.engine import card_messages
from storage import AuditLog
from tests.feishu.conftest import ALICE, BOB, CAROL, Feishu, card_ref

READS_THE_CARD = "deliveries.message_id ="
"""What the statement finding a message's request contains
(``card_messages._DELIVERED_AS``)."""


@contextlib.contextmanager
def _card_reads(f: Feishu) -> Iterator[list[str]]:
    """The statements looking up a message's request while the block runs."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if READS_THE_CARD in " ".join(statement.split()):
            seen.append(statement)

    event.listen(f.database.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(f.database.engine, "before_cursor_execute", record)


def _checks(f: Feishu) -> list[tuple[str | None, str]]:
    with f.database.transaction() as session:
        rows = session.scalars(select(AuditLog).where(AuditLog.event == "adapter_refused")
                               .order_by(AuditLog.id))
        return [(r.request_ref, str(r.details.get("check"))) for r in rows]


async def test_a_cards_message_is_read_once_and_still_names_one_request(
    feishu_http: Feishu,
) -> None:
    f = feishu_http
    await f.send_text("@_user_1 deploy: ship v8.1.0")
    card = await f.wait_card()
    await f.send_text("@_user_1 deploy: ship v8.1.1")
    other = await f.wait_card()
    with _card_reads(f) as reads:
        await f.click(card, operator=ALICE)
        await f.click(card, operator=BOB)  # already decided: refused, the card not re-read
        assert len(reads) == 1
        # A remembered message is still the card of one request only.
        await f.click(card, operator=CAROL, ref=card_ref(other))
        assert len(reads) == 1
    assert await f.status(card) == "submitted"
    assert await f.status(other) == "pending"
    assert _checks(f) == [(card_ref(other), "ref_mismatch")]


async def test_the_remembered_messages_are_bounded(
    feishu_http: Feishu, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(card_messages, "MESSAGES_KEPT", 2)
    f = feishu_http
    cards = []
    for i in range(3):
        await f.send_text(f"@_user_1 deploy: ship v8.2.{i}")
        cards.append(await f.wait_card())
    with _card_reads(f) as reads:
        for card in cards:  # three messages: the first is forgotten
            await f.click(card, operator=ALICE)
        await f.click(cards[2], operator=BOB)  # remembered
        assert len(reads) == 3
        await f.click(cards[0], operator=BOB)  # forgotten: read again
        assert len(reads) == 4
    assert [await f.status(card) for card in cards] == ["submitted"] * 3

