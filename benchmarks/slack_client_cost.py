"""CPU of one Slack Web API call through askhuman's client, and of one click read.

Two things askhuman does on every Slack decision, measured in one process on the
thread that does them (``time.thread_time``: the loopback fake Slack API runs in a
thread of its own, so its work is not counted):

* ``chat.update`` of a decided card (the ``deploy`` test card, rendered once) against
  the fake (``tests/fakes/slack_api.py``), sequentially, through
  - ``askhuman``: ``make_client`` (what ``serve`` uses), called as ``SlackAdapter``
    calls it (``api_call`` with a JSON body),
  - ``chat_update``: the same client through slack-sdk's ``chat_update`` method,
  - ``slack_sdk``: a bare ``AsyncWebClient`` with one kept-alive aiohttp session,
  - ``aiohttp``: a minimal ``session.post(url, json=…)`` + ``await resp.json()``, the
    floor for any client on this stack;
  and ``chat.postMessage`` of a final answer (plain text in a thread, with metadata)
  through ``askhuman``.
* ``read_click`` (``bot.platforms.slack.fast_clicks``) of the URL-encoded
  ``block_actions`` body the click benchmarks send (the whole card rides along).

Rounds alternate the variants; medians of per-round means are printed in µs.

    .venv/bin/python benchmarks/slack_client_cost.py --calls 400 --rounds 7

CPU time on a shared machine is noisy; for instruction counts, run one variant under
callgrind against a fake in another process, at two sizes, and take the difference:

    .venv/bin/python benchmarks/slack_client_cost.py --serve-fake &   # prints its URL
    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        .venv/bin/python benchmarks/slack_client_cost.py --api URL --only read_click --calls 100
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from slack_sdk.web.async_client import AsyncWebClient

from bot.platforms.slack.client import make_client
from bot.platforms.slack.config import SlackConfig
from bot.platforms.slack.fast_clicks import read_click
from renderers.slack import render_request
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackAPI
from tests.renderers.cases import make_card

CHANNEL = "C0BENCH"
Call = Callable[[], Awaitable[object]]


def click_body(blocks: list[dict[str, Any]], ts: str) -> bytes:
    """The form ``slack_ack.click_body`` builds: Approve, with the whole card inside."""
    approve = next(e for b in blocks if b["type"] == "actions" for e in b["elements"])
    payload = {
        "type": "block_actions", "user": {"id": "U00000", "name": "u00000"},
        "team": {"id": "T0TEST"}, "api_app_id": "A0APP", "trigger_id": "1.2.3",
        "container": {"type": "message", "message_ts": ts, "channel_id": CHANNEL},
        "channel": {"id": CHANNEL}, "message": {"ts": ts, "blocks": blocks},
        "state": {"values": {}},
        "response_url": "http://127.0.0.1:1/response_url/bench",
        "actions": [{"type": "button", "action_id": approve["action_id"],
                     "value": approve["value"], "block_id": "b", "action_ts": "1"}],
    }
    return ("payload=" + quote(json.dumps(payload), safe="")).encode()


async def cpu_per_call(call: Call, count: int) -> float:
    """Mean thread CPU of ``count`` sequential awaits of ``call``, in µs."""
    start = time.thread_time()
    for _ in range(count):
        await call()
    return (time.thread_time() - start) / count * 1e6


async def main(api: str | None, calls: int, rounds: int, only: str | None) -> None:
    fake = None if api else FakeSlackAPI().start()
    try:
        await run(api or fake.base_url, calls, rounds, only)  # type: ignore[union-attr]
    finally:
        if fake is not None:
            fake.stop()


async def run(base_url: str, calls: int, rounds: int, only: str | None) -> None:
    ours = make_client(SlackConfig(bot_token=BOT_TOKEN, api_url=base_url))
    bare = AsyncWebClient(token=BOT_TOKEN, base_url=base_url,
                          session=aiohttp.ClientSession())
    session = aiohttp.ClientSession()
    posted = await ours.chat_postMessage(channel=CHANNEL, text="card")
    ts = str(posted["ts"])
    message = render_request(make_card("deploy", "submitted"))
    update = {"channel": CHANNEL, "ts": ts, "text": message["text"],
              "blocks": message["blocks"]}
    url, auth = base_url + "chat.update", {"Authorization": f"Bearer {BOT_TOKEN}"}

    async def minimal() -> object:
        async with session.post(url, json=update, headers=auth) as resp:
            data = await resp.json()
        assert data["ok"]
        return data

    answer = {"channel": CHANNEL, "thread_ts": ts, "text": "Deployed checkout v2.14.0",
              "unfurl_links": False, "unfurl_media": False,
              "metadata": {"event_type": "askhuman_post",
                           "event_payload": {"key": "k", "run": "r", "attempt": 1}}}
    body = click_body(render_request(make_card("deploy"))["blocks"], ts)
    headers = {"content-type": "application/x-www-form-urlencoded"}

    async def click() -> object:
        assert read_click(body, headers) is not None
        return None

    variants: dict[str, Call] = {  # "askhuman" = what SlackAdapter sends (``_call``)
        "chat.update askhuman": lambda: ours.api_call("chat.update", json=dict(update)),
        "chat.update chat_update": lambda: ours.chat_update(**update),
        "chat.update slack_sdk": lambda: bare.chat_update(**update),
        "chat.update aiohttp": minimal,
        "chat.postMessage askhuman": lambda: ours.api_call("chat.postMessage",
                                                           json=dict(answer)),
        "read_click": click,
    }
    if only is not None:
        variants = {only: variants[only]}
    results: dict[str, list[float]] = {name: [] for name in variants}
    for call in variants.values():  # warm-up: connections, caches
        await cpu_per_call(call, 20)
    for round_ in range(rounds):
        order = list(variants) if round_ % 2 == 0 else list(reversed(variants))
        for name in order:
            results[name].append(await cpu_per_call(variants[name], calls))
    print(f"card: {len(json.dumps(update))} bytes of JSON; click body: {len(body)} bytes")
    print(f"{'what':28} {'CPU µs/call (median of rounds)':>32}  rounds")
    for name, values in results.items():
        print(f"{name:28} {statistics.median(values):32.0f}  "
              + " ".join(f"{v:.0f}" for v in values))
    await session.close()
    await bare.session.close()  # type: ignore[union-attr]
    await ours.aclose()  # type: ignore[attr-defined]


def serve_fake() -> None:
    """Run the fake alone (for callgrind runs of the client), forgetting its calls."""
    fake = FakeSlackAPI().start()
    print(fake.base_url, flush=True)
    while True:
        time.sleep(1)
        fake.clear_calls()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", help="one variant (by its printed name), e.g. read_click")
    parser.add_argument("--api", help="the Web API base URL of a fake run with --serve-fake")
    parser.add_argument("--serve-fake", action="store_true")
    args = parser.parse_args()
    if args.serve_fake:
        serve_fake()
    else:
        asyncio.run(main(args.api, args.calls, args.rounds, args.only))
