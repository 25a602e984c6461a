"""Bearer keys and the per-client rate limit.

A key is looked up by its SHA-256 hash among active clients (revoked ones never
match). The rate limit is global: one token bucket per client in the database,
shared by every replica (``bot.engine.rate_limits``): ``rate_limit`` requests per
minute, bursts up to the same number; beyond it the answer is 429 with
``Retry-After``.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

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


class RateTokens(Protocol):
    """The engine's shared buckets (``Engine.take_rate_token``)."""

    def take_rate_token(self, client_id: int, per_minute: int) -> Awaitable[float]: ...


class RateLimiter:
    """Spends a token from the client's shared bucket, or raises 429.

    A refusal is remembered in this process until the bucket's next token is due:
    nobody can refill it sooner, so that stays exact across replicas, and a client
    hammering past its limit costs no database work until then.
    """

    def __init__(self, tokens: RateTokens, clock: Callable[[], float] = time.monotonic) -> None:
        self._tokens = tokens
        self._clock = clock
        self._lock = threading.Lock()
        self._empty_until: dict[int, float] = {}

    async def take(self, client: ApiClientInfo) -> None:
        """Spend one token or raise 429 with the seconds until the next one."""
        rate = max(1, client.rate_limit)
        with self._lock:
            until = self._empty_until.get(client.id, 0.0)
        wait = until - self._clock()
        if wait <= 0:
            wait = await self._tokens.take_rate_token(client.id, rate)
            if wait <= 0:
                return
            with self._lock:
                self._empty_until[client.id] = self._clock() + wait
        seconds = max(1, math.ceil(wait))
        raise Problem(429, "rate-limited",
                      f"Rate limit of {rate} requests per minute exceeded; retry in "
                      f"{seconds} s.", headers={"Retry-After": str(seconds)})
