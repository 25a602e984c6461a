"""The serving process freezes its startup heap once (``bot.engine.heap``)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from bot.engine import heap
from tests.engine.helpers import make_engine


@pytest.fixture
def fresh_heap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(heap, "_frozen", False)
    threshold = gc.get_threshold()
    yield
    gc.set_threshold(*threshold)


def test_the_first_call_freezes_what_is_alive_and_later_calls_do_nothing(
    fresh_heap: None,
) -> None:
    alive = [[i] for i in range(1000)]  # long-lived objects the collector tracks
    try:
        before = gc.get_freeze_count()
        assert heap.freeze_startup_heap() is True
        assert gc.get_freeze_count() >= before + len(alive)
        assert gc.get_threshold()[0] == heap.YOUNG_GC_THRESHOLD
        assert heap.freeze_startup_heap() is False  # once per process
    finally:
        gc.unfreeze()


async def test_serving_freezes_the_heap(db_url: str, fresh_heap: None) -> None:
    engine, _, _ = make_engine(db_url)
    stop = asyncio.Event()
    stop.set()
    try:
        await engine.serve_forever(stop, poll_interval=0.01)
        assert heap._frozen and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
