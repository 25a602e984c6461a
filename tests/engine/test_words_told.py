"""What the engine tells a clicker is words by key, told in the clicker's locale: live,
and later through the click inbox (stored as key and parameters; rows written before
that hold English and are told as they are)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue
from sqlalchemy import select, update

from bot.engine import Engine, Identity
from bot.engine.inbox import Click
from renderers.card import RequestCard
from renderers.words import Said
from storage import ClickInbox
from tests.engine.helpers import (
    ORIGIN,
    STARTER,
    FakeAdapter,
    FakeClock,
    FakeDirectory,
    alice,
    make_engine,
)


@dataclass
class GarblingAdapter(FakeAdapter):
    """Stores clicks raw and cannot read them back (``read_click`` raises), and tells
    clickers later, keeping the words it was given."""

    told: list[Said] = field(default_factory=list)
    tell_failures: int = 0

    @staticmethod
    def read_click(card: RequestCard, action_id: str, values: Mapping[str, Any]
                   ) -> tuple[str, dict[str, JsonValue]]:
        raise ValueError("the form came back garbled")

    async def tell_clicker(self, who: Identity, reply_to: Mapping[str, str],
                           words: Said) -> None:
        if self.tell_failures:
            self.tell_failures -= 1
            raise ConnectionError("the platform is down")
        self.told.append(words)


def _engine(db_url: str) -> tuple[Engine, GarblingAdapter, FakeClock]:
    engine, _, clock = make_engine(db_url)
    adapter = GarblingAdapter()
    engine.register_adapter(adapter, FakeDirectory())
    return engine, adapter, clock


async def _ref(engine: Engine, adapter: FakeAdapter) -> str:
    await engine.start_run("deploy", "Deploy v1", STARTER, ORIGIN)
    return adapter.delivered[-1][0].ref


def _click(ref: str) -> Click:
    return Click("slack", ref, alice(), "approve", {"environment": "staging"},
                 reply_to={"channel": "C_OPS"})


def _stored_message(engine: Engine) -> str | None:
    with engine.db.transaction() as s:
        return s.scalars(select(ClickInbox.message)).one()


async def test_a_zh_cn_clicker_reads_why_their_answer_could_not_be_read(db_url: str) -> None:
    engine, adapter, _ = _engine(db_url)
    ref = await _ref(engine, adapter)
    recorded = await engine.record_click(_click(ref))
    assert recorded is not None
    answer = await engine.decide_click(recorded)
    assert answer.outcome == "rejected"
    assert answer.message == "Your answer could not be read: the form came back garbled"
    assert answer.words.text("zh-CN") == "无法读取你的回复：the form came back garbled"
    # The inbox row keeps the words (key and parameters), not a sentence.
    assert Said.from_stored(_stored_message(engine) or "") == answer.words


async def test_the_worker_tells_stored_words_and_legacy_english_rows(db_url: str) -> None:
    engine, adapter, clock = _engine(db_url)
    ref = await _ref(engine, adapter)
    adapter.tell_failures = 1  # decided by the worker; telling is retried
    assert await engine.record_click(_click(ref)) is not None
    clock.advance(engine.tuning.click_lease.total_seconds() + 1)
    assert await engine.recover_clicks() == 1
    assert adapter.told == []
    stored = _stored_message(engine)
    assert stored is not None and Said.from_stored(stored).key == "refused.unreadable"
    # A row stored by an older version holds the English sentence: told as it is.
    legacy = "Your answer could not be read: the form came back garbled"
    with engine.db.transaction() as s:
        s.execute(update(ClickInbox).values(message=legacy))
    clock.advance(60)
    assert await engine.recover_clicks() == 1
    [told] = adapter.told
    assert told.text("zh-CN") == told.text("en") == legacy
