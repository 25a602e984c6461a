"""The one caching rule every platform directory follows (members, groups, email → id).

A fresh answer (younger than the TTL) is used as is. Once it has expired the platform
is asked again; if that fails, ``DirectoryUnavailable`` is raised and the stale answer
is dropped, never reused: a person removed from a chat must not keep approving because
the platform is rate limiting us. Concurrent misses for one key share a single call
(and its failure), so twenty clicks at once cost one lookup.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from bot.engine.ports import DirectoryUnavailable

V = TypeVar("V")

Clock = Callable[[], float]


class TtlCache(Generic[V]):
    """Async get-or-load with a TTL, per-key single flight and no stale fallback.

    ``clock`` is read on every call (``owner.clock`` in a lambda lets tests move time).
    """

    def __init__(self, ttl_seconds: float, clock: Clock = time.monotonic) -> None:
        self.ttl = ttl_seconds
        self._clock = clock
        self._values: dict[str, tuple[float, V]] = {}
        self._inflight: dict[str, asyncio.Future[V]] = {}

    def peek(self, key: str) -> tuple[float, V] | None:
        """``(stored_at, value)`` when a fresh answer is cached, else None."""
        hit = self._values.get(key)
        return hit if hit is not None and self._clock() - hit[0] < self.ttl else None

    def put(self, key: str, value: V) -> None:
        """Store an answer obtained elsewhere (e.g. one batch call for many keys)."""
        self._values[key] = (self._clock(), value)

    async def get(self, key: str, load: Callable[[], Awaitable[V]]) -> V:
        """The cached value, or ``load()``'s; raise ``DirectoryUnavailable`` if it fails."""
        hit = self.peek(key)
        if hit is not None:
            return hit[1]
        pending = self._inflight.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._load(key, load))
            self._inflight[key] = pending
            pending.add_done_callback(lambda done: self._settled(key, done))
        return await asyncio.shield(pending)

    async def _load(self, key: str, load: Callable[[], Awaitable[V]]) -> V:
        try:
            value = await load()
        except DirectoryUnavailable:
            self._values.pop(key, None)
            raise
        except Exception as exc:
            self._values.pop(key, None)
            raise DirectoryUnavailable(key) from exc
        self._values[key] = (self._clock(), value)
        return value

    def _settled(self, key: str, done: asyncio.Future[V]) -> None:
        if self._inflight.get(key) is done:
            del self._inflight[key]
        if not done.cancelled():
            done.exception()  # retrieved: no "never retrieved" warning if all waiters left

    def clear(self) -> None:
        self._values.clear()
