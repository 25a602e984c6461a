"""Replay protection for inbound Feishu events.

The SDK verifies signatures but has no notion of freshness: a captured, validly
signed callback could be posted again later. We refuse timestamps outside a window
and remember nonces (HTTP) and event / message ids (both transports) for a while.
Memory is bounded and guards one process; it is the quick first filter. Ids that pass
it are also recorded with ``Engine.first_seen`` (the shared ``seen_events`` table), so
a re-push or replay that reaches another replica is caught there too. The timestamp
window stays purely in memory.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable


class _ExpiringSet:
    """Insertion-ordered set whose entries expire after ``ttl`` seconds (thread-safe)."""

    def __init__(self, ttl: float, max_items: int, clock: Callable[[], float]) -> None:
        self._ttl = ttl
        self._max = max_items
        self._clock = clock
        self._items: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def add_if_new(self, key: str) -> bool:
        """Remember ``key``; return False if it was already remembered (a replay)."""
        now = self._clock()
        with self._lock:
            self._evict(now)
            if key in self._items:
                return False
            self._items[key] = now + self._ttl
            while len(self._items) > self._max:
                self._items.popitem(last=False)
            return True

    def _evict(self, now: float) -> None:
        while self._items:
            key, expires = next(iter(self._items.items()))
            if expires > now:
                break
            del self._items[key]


class ReplayGuard:
    """Timestamp window + nonce memory + event id memory."""

    def __init__(
        self,
        window_seconds: float = 300.0,
        event_ttl_seconds: float = 24 * 3600.0,
        max_items: int = 100_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.window = window_seconds
        self._clock = clock
        # A nonce only needs remembering while its timestamp is still acceptable.
        self._nonces = _ExpiringSet(2 * window_seconds, max_items, clock)
        # Feishu re-pushes unacknowledged events for hours, so event ids live longer.
        self._events = _ExpiringSet(event_ttl_seconds, max_items, clock)

    def fresh(self, timestamp_seconds: float) -> bool:
        """Whether a timestamp is within the window around now (either direction)."""
        return abs(self._clock() - timestamp_seconds) <= self.window

    def first_nonce(self, nonce: str) -> bool:
        return bool(nonce) and self._nonces.add_if_new(nonce)

    def first_event(self, event_id: str) -> bool:
        return bool(event_id) and self._events.add_if_new(event_id)


def parse_epoch(value: str | int | float | None) -> float | None:
    """Seconds since the epoch from Feishu's s / ms / µs timestamps; None if unparseable."""
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(number):  # "nan", "inf", "1e400"
        return None
    if number > 1e14:  # microseconds (older card callback examples)
        return number / 1e6
    if number > 1e11:  # milliseconds (event headers)
        return number / 1e3
    return number
