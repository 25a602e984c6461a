"""The API rate limit is one token bucket per client in the database: a burst of
``rate_limit``, refilled at ``rate_limit`` per minute, shared by every replica and
process (SQLite file or PostgreSQL)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import select, update

from bot.api.auth import RateLimiter
from bot.api.problems import Problem
from bot.engine import Engine
from storage import Database, RateLimit
from tests.api.conftest import add_client
from tests.engine.helpers import make_engine

ROOT = Path(__file__).resolve().parents[2]


def _age_bucket(database: Database, client_id: int, seconds: float) -> None:
    """Pretend the bucket was last touched ``seconds`` earlier (time passing)."""
    with database.transaction() as session:
        session.execute(update(RateLimit).where(RateLimit.client_id == client_id)
                        .values(updated_at=RateLimit.updated_at - seconds))


async def _granted(engine: Engine, client_id: int, per_minute: int, attempts: int) -> int:
    waits = [await engine.take_rate_token(client_id, per_minute) for _ in range(attempts)]
    return sum(1 for wait in waits if wait == 0.0)


async def test_bucket_bursts_refuses_with_the_wait_and_refills(db_url: str) -> None:
    engine, _, _ = make_engine(db_url)
    client = add_client(engine.db, "ci", ["ops"], rate_limit=6).info
    assert await _granted(engine, client.id, 6, 6) == 6  # a full bucket: the burst
    wait = await engine.take_rate_token(client.id, 6)
    assert 9.0 < wait <= 10.0  # 6 a minute: the next token in (almost) 10 s
    _age_bucket(engine.db, client.id, 20.0)  # 20 s later: two tokens back
    assert await _granted(engine, client.id, 6, 3) == 2
    _age_bucket(engine.db, client.id, 3600.0)  # an idle hour refills to the cap only
    assert await _granted(engine, client.id, 6, 8) == 6
    with engine.db.transaction() as session:
        tokens = session.scalar(select(RateLimit.tokens))
    assert tokens is not None and tokens < 1.0
    engine.db.dispose()


async def test_a_lowered_limit_caps_a_fuller_bucket(db_url: str) -> None:
    engine, _, _ = make_engine(db_url)
    client = add_client(engine.db, "ci", ["ops"], rate_limit=100).info
    assert await _granted(engine, client.id, 100, 1) == 1  # 99 left at the old limit
    assert await _granted(engine, client.id, 3, 5) == 3
    engine.db.dispose()


async def test_two_engines_on_one_database_share_the_bucket(db_url: str) -> None:
    """Two replicas (engines with their own connection pools), taking concurrently."""
    one, _, _ = make_engine(db_url)
    two, _, _ = make_engine(db_url)
    client = add_client(one.db, "ci", ["ops"], rate_limit=20).info
    started = time.monotonic()
    counts = await asyncio.gather(*(_granted(e, client.id, 20, 15) for e in (one, two, one, two)))
    refill = (time.monotonic() - started) * 20 / 60
    # Shared: two per-replica buckets would grant up to 40. Which replica wins the
    # tokens is not a promise (on a loaded machine one may take all 20 first).
    assert 20 <= sum(counts) <= 20 + refill + 1, (counts, refill)
    one.db.dispose()
    two.db.dispose()


def test_two_processes_together_get_the_configured_rate(db_url: str, tmp_path: Path) -> None:
    """Separate processes (what several ``serve`` on one SQLite file, or replicas on
    PostgreSQL, are), started together, each trying 40 times for a limit of 30."""
    database = Database(db_url)
    database.upgrade()
    client = add_client(database, "ci", ["ops"], rate_limit=30).info
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    children = [subprocess.Popen(
        [sys.executable, "-m", "tests.engine.rate_child", db_url, str(client.id), "30", "40",
         str(go)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)]
    deadline = time.monotonic() + 90
    while len(list(tmp_path.glob("go.ready.*"))) < 2:  # both imported and connected
        assert time.monotonic() < deadline and all(c.poll() is None for c in children)
        time.sleep(0.05)
    started = time.monotonic()
    go.touch()
    results = [child.communicate(timeout=120) for child in children]
    refill = (time.monotonic() - started) * 30 / 60
    assert all(child.returncode == 0 for child in children), results
    counts = [int(out) for out, _ in results]
    assert 30 <= sum(counts) <= 30 + refill + 1, (counts, refill)
    database.dispose()


async def test_a_refusal_is_remembered_until_the_next_token(db_url: str) -> None:
    """Past the limit, the API answers 429 from memory until a token is due (no
    database work for a client hammering away), then asks the shared bucket again."""
    engine, _, _ = make_engine(db_url)
    client = add_client(engine.db, "ci", ["ops"], rate_limit=2).info
    asked: list[float] = []

    class Counting:
        async def take_rate_token(self, client_id: int, per_minute: int) -> float:
            wait = await engine.take_rate_token(client_id, per_minute)
            asked.append(wait)
            return wait

    now = [100.0]
    limiter = RateLimiter(Counting(), clock=lambda: now[0])
    await limiter.take(client)
    await limiter.take(client)
    with pytest.raises(Problem) as refused:
        await limiter.take(client)
    assert refused.value.status == 429 and refused.value.headers["Retry-After"] == "30"
    now[0] += 20.0
    with pytest.raises(Problem) as again:
        await limiter.take(client)
    assert again.value.headers["Retry-After"] == "10" and len(asked) == 3
    now[0] += 10.5
    _age_bucket(engine.db, client.id, 30.5)  # the bucket's own time moves as well
    await limiter.take(client)
    assert len(asked) == 4 and asked[-1] == 0.0
    engine.db.dispose()
