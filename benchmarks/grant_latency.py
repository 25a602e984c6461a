"""How fast is a tool approval answered by a standing grant (issue 19, "Speed")?

One process on SQLite (or ``--database`` PostgreSQL): the served app exactly as
``askhuman serve`` wires it (fake Slack and Feishu on loopback), an API client, and one
grant with uses to spare. Each round fires ``--concurrency`` matching approvals at once:

- in-process: ``engine.create_external`` (the engine's cost: the request, the grant's
  compare-and-set, the audit rows, the resolution, in one transaction);
- HTTP: ``POST /api/v1/approvals`` through the app on 127.0.0.1 (plus auth, the rate
  limit and the JSON), client and server in this one process.

    python benchmarks/grant_latency.py --concurrency 200 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]
os.environ.setdefault("SKIP_SLACK_SDK_WARNING", "1")

from bot.api.approval_args import approval_request  # noqa: E402
from bot.engine import grant_rows  # noqa: E402
from bot.engine.external import ExternalAsk  # noqa: E402
from bot.engine.ports import Identity  # noqa: E402
from bot.settings import Settings  # noqa: E402
from bot.tools.binding import binding_hash  # noqa: E402
from tests.api.conftest import add_client, make_settings, running_door  # noqa: E402
from tests.fakes.asgi_server import AsgiServer  # noqa: E402
from tests.fakes.feishu_api import FakeFeishuApi  # noqa: E402
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackAPI  # noqa: E402

TOOL, ARGS = "restart_service", {"service": "web"}


def settings(url: str) -> Settings:
    raw = make_settings(url).model_dump(mode="json", exclude={"source"})
    raw["routes"]["ops"]["grants"] = {"max_duration": "8h", "max_uses": 1_000_000}
    return Settings.model_validate(raw)


def seed_grant(door: object, agent: str) -> None:
    """A grant as a click on "Approve and allow similar…" makes it."""
    database = door.database  # type: ignore[attr-defined]
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    granted = grant_rows.Granted(route="ops", agent=agent, tool=TOOL, scope=None,
                                 args=dict(ARGS), binding=binding_hash(TOOL, ARGS, {}),
                                 request_ref="bench", run_id=None)
    with database.transaction() as session:
        grant_rows.create(session, now, granted, grant_rows.Terms(8 * 3600, 1_000_000),
                          [Identity("slack", "U0ALICE", "Alice")])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def line(name: str, ms: list[float]) -> str:
    return (f"{name:<12} n={len(ms):<5} p50={statistics.median(ms):7.2f} ms  "
            f"p99={pct(ms, 0.99):7.2f} ms  max={max(ms):7.2f} ms")


async def main(concurrency: int, rounds: int, database: str | None) -> None:
    url = database or f"sqlite:///{tempfile.mkdtemp()}/bench.db"
    with FakeSlackAPI(token=BOT_TOKEN) as fake_slack:
        feishu = FakeFeishuApi(app_id=f"cli_{uuid.uuid4().hex[:12]}", app_secret="s",
                               chats={"oc_approvals": ["ou_alice"]})
        with AsgiServer(feishu.app) as feishu_server:
            async with running_door(fake_slack, (feishu, feishu_server.url),
                                    settings(url)) as door:
                client = add_client(door.database, "bench", ["ops"], rate_limit=1_000_000)
                seed_grant(door, "bench")
                ask = ExternalAsk(client=client.info, route="ops", kind="approval",
                                  args=approval_request(TOOL, ARGS, None), fingerprint="-",
                                  tool_name=TOOL, tool_input=dict(ARGS))
                body = {"route": "ops", "tool_name": TOOL, "args": ARGS}
                results: dict[str, list[float]] = {"in-process": [], "HTTP": []}

                async def engine_call() -> float:
                    start = time.perf_counter()
                    view, _ = await door.engine.create_external(ask)
                    assert view.status == "submitted", view.status
                    return (time.perf_counter() - start) * 1000

                async def http_call() -> float:
                    start = time.perf_counter()
                    response = await door.http.post(door.api("/approvals"), json=body,
                                                    headers=client.headers)
                    assert response.json()["status"] == "submitted", response.text
                    return (time.perf_counter() - start) * 1000

                await asyncio.gather(*(engine_call() for _ in range(20)))  # warm up
                for _ in range(rounds):
                    results["in-process"] += await asyncio.gather(
                        *(engine_call() for _ in range(concurrency)))
                    results["HTTP"] += await asyncio.gather(
                        *(http_call() for _ in range(concurrency)))
                print(f"{concurrency} concurrent approvals answered by a grant, "
                      f"{rounds} round(s), {'PostgreSQL' if database else 'SQLite'}:")
                for name, ms in results.items():
                    print(line(name, ms))
                single = [await engine_call() for _ in range(200)]
                print(line("one at a time", single))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database", default=None)
    args = parser.parse_args()
    asyncio.run(main(args.concurrency, args.rounds, args.database))
