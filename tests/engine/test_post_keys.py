"""Every post the engine asks for carries a ``PostKey`` that is the same on each retry
of that post (so adapters can make it idempotent) and different for different posts."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.engine import DeliveryRef, DeliveryTarget, Origin, PostKey
from renderers.card import RequestCard
from tests.engine.helpers import ORIGIN, STARTER, FakeDirectory, alice, make_engine
from tests.engine.test_outbox import FlakyAdapter


@dataclass
class KeyedAdapter(FlakyAdapter):
    """Records the key of every call, failed ones included."""

    tried: list[PostKey | None] = field(default_factory=list)

    async def deliver(self, card: RequestCard, target: DeliveryTarget,
                      key: PostKey | None = None) -> DeliveryRef:
        self.tried.append(key)
        return await super().deliver(card, target, key)

    async def post_run_result(self, origin: Origin, text: str,
                              key: PostKey | None = None) -> None:
        self.tried.append(key)
        await super().post_run_result(origin, text, key)


async def test_a_retried_post_keeps_its_key_and_says_it_is_a_retry(db_url: str) -> None:
    engine, _, clock = make_engine(db_url)
    adapter = KeyedAdapter(fail_post=1, fail_deliver=1)
    engine.register_adapter(adapter, FakeDirectory())
    await engine.start_run("deploy", "Deploy v1.2.3", STARTER, ORIGIN)
    clock.advance(60)
    await engine.run_worker_once()  # the card's retry
    ref = adapter.delivered[0][0].ref
    await engine.respond(ref, alice(), "approve", {"environment": "staging"})
    await engine.run_worker_once()  # resume; the result's first post fails
    clock.advance(60)
    await engine.run_worker_once()  # ...and is retried
    assert len(adapter.results) == 1 and len(adapter.delivered) == 1
    keys = [k for k in adapter.tried if k is not None]
    assert len(keys) == 4
    cards, results = keys[:2], keys[2:]
    assert {k.id for k in cards} == {f"card:{ref}:slack:channel:C_OPS"}
    assert len({k.id for k in results}) == 1 and results[0].id.startswith("result:")
    assert [(k.attempt, k.retry) for k in cards + results] == [
        (1, False), (2, True), (1, False), (2, True)]
    assert all(k.since is not None for k in keys) and results[0].run_id
