"""Bearer keys and the per-client rate limit.

A key is looked up by its SHA-256 hash among active clients (revoked ones never
match). The rate limit is a token bucket per client and replica: ``rate_limit``
requests per minute, bursts up to the same number; beyond it the answer is 429 with
``Retry-After``.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping

from bot.api.keys import hash_key
from bot.api.problems import Problem, unauthorized
from bot.engine.core import Engine
from bot.engine.external import ApiClientInfo


def bearer_token(headers: Mapping[str, str]) -> str | None:
    value = headers.get("authorization", "")
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


async def client_for_key(engine: Engine, key: str | None) -> ApiClientInfo:
    """The active client holding ``key``; 401 problem otherwise."""
    if not key:
        raise unauthorized("Send your API key as 'Authorization: Bearer <key>'.")
    if len(key) > 256:
        raise unauthorized("The API key is not valid.")
    client = await engine.api_client_by_key_hash(hash_key(key))
    if client is None:
        raise unauthorized("The API key is not valid or was revoked.")
    return client


class RateLimiter:
    """Token buckets by client id (per process; thread-safe)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[int, tuple[float, float]] = {}

    def take(self, client: ApiClientInfo) -> None:
        """Spend one token or raise 429 with the seconds until the next one."""
        rate = max(1, client.rate_limit)
        per_second = rate / 60.0
        now = self._clock()
        with self._lock:
            tokens, last = self._buckets.get(client.id, (float(rate), now))
            tokens = min(float(rate), tokens + (now - last) * per_second)
            if tokens < 1.0:
                self._buckets[client.id] = (tokens, now)
                wait = math.ceil((1.0 - tokens) / per_second)
                raise Problem(429, "rate-limited",
                              f"Rate limit of {rate} requests per minute exceeded; retry in "
                              f"{wait} s.", headers={"Retry-After": str(wait)})
            self._buckets[client.id] = (tokens - 1.0, now)
