"""How fast does askhuman ack a burst of Slack button clicks?

Runs everything on 127.0.0.1: the fake Slack Web API, askhuman's real ``serve``
wiring (SQLite in a temp dir, the scripted ``deploy`` agent, Bolt over HTTP under
uvicorn in its own thread), and, for comparison, a bare Bolt ``AsyncApp`` whose only
listener acks. It posts one request card, then fires N concurrent signed
``block_actions`` clicks at each app and reports ack latency (median, p99) and the
ratio between the two, measured in the same run.

    python benchmarks/slack_ack.py --clicks 100 [--rounds 3]

Slack's deadline is 3 s; the target is p99 well under that and a ratio close to 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("SKIP_SLACK_SDK_WARNING", "1")

import aiohttp  # noqa: E402
import httpx  # noqa: E402
from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler  # noqa: E402
from slack_bolt.async_app import AsyncAck, AsyncApp  # noqa: E402
from slack_sdk.signature import SignatureVerifier  # noqa: E402
from slack_sdk.web.async_client import AsyncWebClient  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import Response  # noqa: E402

from bot.commands.serve_cmd import build_app, start_platforms  # noqa: E402
from bot.engine.core import Engine  # noqa: E402
from bot.settings import Settings  # noqa: E402
from bot.web import create_app  # noqa: E402
from storage import Database  # noqa: E402
from tests.fakes.asgi_server import AsgiServer  # noqa: E402
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackAPI  # noqa: E402

SECRET = "bench-signing-secret"
CHANNEL = "C0BENCH"
GROUP = "S0BENCH"


def settings(db_url: str) -> Settings:
    return Settings.model_validate({
        "database_url": db_url,
        "agents": {"deploy": {"model": "scripted:deploy", "route": "ops",
                              "starters": {"slack": {"users": ["U0STARTER"]}}}},
        "routes": {"ops": {"timeout": "30m", "slack": {
            "channel": CHANNEL, "approvers": {"groups": [GROUP]}}}},
    })


def bare_app(fake: FakeSlackAPI) -> Any:
    """A Bolt app that only acks: the floor any Bolt-based bot can reach."""
    app = AsyncApp(
        client=AsyncWebClient(token=BOT_TOKEN, base_url=fake.base_url), signing_secret=SECRET
    )

    async def just_ack(ack: AsyncAck) -> None:
        await ack()

    app.action(re.compile(".*"))(just_ack)
    handler = AsyncSlackRequestHandler(app)

    async def endpoint(request: Request) -> Response:
        return await handler.handle(request)

    return create_app([("/slack/events", endpoint)])


def signed(body: str, content_type: str) -> dict[str, str]:
    ts = str(int(time.time()))
    return {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": SignatureVerifier(SECRET).generate_signature(timestamp=ts, body=body),
    }


def click_body(fake: FakeSlackAPI, ts: str, user: str) -> str:
    message = fake.message(CHANNEL, ts)
    assert message is not None
    buttons = [e for b in message.blocks if b["type"] == "actions" for e in b["elements"]]
    approve = buttons[0]
    values: dict[str, Any] = {}
    for block in message.blocks:
        if block["type"] == "input" and block["element"]["type"] == "static_select":
            values[block["block_id"]] = {block["element"]["action_id"]: {
                "type": "static_select", "selected_option": {"value": "o0"}}}
    payload = {
        "type": "block_actions", "user": {"id": user, "name": user.lower()},
        "team": {"id": "T0TEST"}, "api_app_id": "A0APP", "trigger_id": "1.2.3",
        "container": {"type": "message", "message_ts": ts, "channel_id": CHANNEL},
        "channel": {"id": CHANNEL}, "message": {"ts": ts, "blocks": message.blocks},
        "state": {"values": values}, "response_url": fake.response_url("bench"),
        "actions": [{"type": "button", "action_id": approve["action_id"],
                     "value": approve["value"], "block_id": "b", "action_ts": "1"}],
    }
    return "payload=" + quote(json.dumps(payload), safe="")


async def burst(url: str, bodies: list[str]) -> list[float]:
    """Send all bodies at once; return per-request latency in seconds."""
    connector = aiohttp.TCPConnector(limit=len(bodies))
    async with aiohttp.ClientSession(connector=connector) as client:

        async def one(body: str) -> float:
            headers = signed(body, "application/x-www-form-urlencoded")
            t0 = time.perf_counter()
            async with client.post(url + "/slack/events", data=body, headers=headers) as response:
                await response.read()
                elapsed = time.perf_counter() - t0
                if response.status != 200:
                    raise RuntimeError(f"ack failed: {response.status}")
            return elapsed

        return list(await asyncio.gather(*(one(b) for b in bodies)))


async def new_card(fake: FakeSlackAPI, url: str, n: int) -> str:
    """Start a run with a slash command and wait for its card; returns the card's ts."""
    before = {m.ts for m in fake.messages.values() if m.channel == CHANNEL}
    body = urlencode({"command": "/askhuman", "text": f"run deploy ship v1.{n}.0",
                      "user_id": "U0STARTER", "user_name": "starter", "channel_id": "C0ORIGIN",
                      "team_id": "T0TEST", "response_url": fake.response_url("cmd")})
    async with httpx.AsyncClient() as client:
        response = await client.post(url + "/slack/events", content=body,
                                     headers=signed(body, "application/x-www-form-urlencoded"))
        response.raise_for_status()
    for _ in range(500):
        fresh = [m.ts for m in list(fake.messages.values())
                 if m.channel == CHANNEL and m.blocks and m.ts not in before]
        if fresh:
            return fresh[0]
        await asyncio.sleep(0.01)
    raise RuntimeError("no card was posted")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main(clicks: int, rounds: int) -> None:
    users = [f"U{i:05d}" for i in range(clicks)]
    with tempfile.TemporaryDirectory() as tmp, FakeSlackAPI() as fake:
        fake.group_members[GROUP] = users
        conf = settings(f"sqlite:///{Path(tmp) / 'bench.db'}")
        database = Database(conf.database_url)
        database.upgrade()
        engine = Engine(database, conf)
        env = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SECRET,
               "SLACK_API_URL": fake.base_url}
        ours = build_app(engine, start_platforms(engine, conf, env))
        with AsgiServer(ours) as askhuman, AsgiServer(bare_app(fake)) as bare:
            results: dict[str, list[float]] = {"askhuman": [], "bare bolt": []}
            for n in range(rounds + 1):  # round 0 warms both apps up
                ts = await new_card(fake, askhuman.url, n)
                bodies = [click_body(fake, ts, u) for u in users]
                # Alternate who goes first, and let the previous burst's follow-up
                # work settle, so neither app pays for the other's background work.
                pair = [("bare bolt", bare), ("askhuman", askhuman)]
                for name, server in pair if n % 2 else pair[::-1]:
                    await asyncio.sleep(0.5)
                    latencies = await burst(server.url, bodies)
                    if n:
                        results[name] += latencies
        database.dispose()

    print(f"\n{clicks} concurrent signed clicks x {rounds} round(s), 127.0.0.1, uvicorn + Bolt\n")
    print(f"{'app':<12}{'median ms':>12}{'p99 ms':>10}{'max ms':>10}")
    for name, values in results.items():
        print(f"{name:<12}{statistics.median(values) * 1000:>12.1f}"
              f"{pct(values, 0.99) * 1000:>10.1f}{max(values) * 1000:>10.1f}")
    ours_, base = results["askhuman"], results["bare bolt"]
    print(f"{'ratio':<12}{statistics.median(ours_) / statistics.median(base):>12.2f}"
          f"{pct(ours_, 0.99) / pct(base, 0.99):>10.2f}")
    verdict = "OK" if pct(ours_, 0.99) < 3.0 else "TOO SLOW"
    print(f"\nSlack's ack deadline is 3000 ms: p99 {pct(ours_, 0.99) * 1000:.0f} ms -> {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, default=100, help="concurrent clicks per burst")
    parser.add_argument("--rounds", type=int, default=3, help="measured bursts per app")
    options = parser.parse_args()
    asyncio.run(main(options.clicks, options.rounds))
