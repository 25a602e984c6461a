"""Remember recently seen ids so Events API retries are not processed twice."""

from __future__ import annotations

import time
from collections import OrderedDict


class RecentIds:
    """A bounded, time-limited set. ``add`` returns False when the id was already seen.

    The quick, per-process first filter; ids it has not seen are then recorded with
    ``Engine.first_seen`` (shared by all replicas) by the dedupe middleware.
    """

    def __init__(self, ttl_seconds: float = 900.0, max_size: int = 10_000) -> None:
        self._ttl = ttl_seconds
        self._max = max_size
        self._seen: OrderedDict[str, float] = OrderedDict()

    def add(self, key: str) -> bool:
        now = time.monotonic()
        self._expire(now)
        if key in self._seen:
            return False
        self._seen[key] = now
        while len(self._seen) > self._max:
            self._seen.popitem(last=False)
        return True

    def __contains__(self, key: object) -> bool:
        self._expire(time.monotonic())
        return key in self._seen

    def _expire(self, now: float) -> None:
        while self._seen:
            key, seen_at = next(iter(self._seen.items()))
            if now - seen_at < self._ttl:
                break
            del self._seen[key]
