"""How fast does askhuman ack a burst of Slack button clicks, against a bare Bolt app?

Four processes on 127.0.0.1 (``benchmarks/harness.py``):

* the fake Slack Web API (``--role fake``, listen backlog 4096), with a small
  inspection endpoint (``/_bench/…``) that shows the client the posted cards;
* askhuman: the real ``askhuman serve`` CLI with Slack over HTTP (``/slack/events``),
  SQLite and the scripted ``deploy`` agent;
* the baseline (``--role baseline``): a bare slack-bolt ``AsyncApp`` whose only
  listener acks, served with the same uvicorn settings as ``askhuman serve``;
* this process, the load client: it fires N signed ``block_actions`` clicks at once
  at each app and times each until its HTTP response (the ack) is received.

Two cases: ``race`` (N approvers click the same card) and ``spread`` (N clicks on N
different cards, one each). Rounds alternate which app goes first; round 0 warms up
and is not counted. askhuman must decide every card exactly once.

    python benchmarks/slack_ack.py --clicks 100 --rounds 4 [--cases race,spread]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

import harness as h  # noqa: E402

SECRET = "bench-signing-secret"
CHANNEL = "C0BENCH"
ORIGIN = "C0ORIGIN"
GROUP = "S0BENCH"
STARTER = "U0STARTER"
SCRIPT = "slack_ack.py"


# ---------------------------------------------------------------- role: fake Slack


def run_fake(port: int, users: int, ready: Path) -> None:
    """The fake Web API (its own server thread) plus ``/_bench/cards`` on ``port``."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from tests.fakes.slack_api import FakeSlackAPI

    fake = FakeSlackAPI().start()
    fake.add_users([STARTER, *approvers(users)])
    fake.group_members[GROUP] = approvers(users)

    async def cards(_request: Request) -> JSONResponse:
        return JSONResponse({m.ts: m.blocks for m in list(fake.messages.values())
                             if m.channel == CHANNEL and m.blocks})

    async def count(request: Request) -> JSONResponse:
        """How many messages in ``channel`` contain ``text`` (final answers, say)."""
        channel, text = request.query_params["channel"], request.query_params["text"]
        return JSONResponse(sum(1 for m in list(fake.messages.values())
                                if m.channel == channel and text in m.text))

    async def posted(request: Request) -> JSONResponse:
        """When (``time.monotonic``, the same clock in every process on this machine)
        each ``method`` call to ``channel`` whose text contains ``text`` arrived."""
        method = request.query_params.get("method", "chat.postMessage")
        channel, text = request.query_params["channel"], request.query_params["text"]
        return JSONResponse([c.at for c in list(fake.calls) if c.method == method
                             and c.body.get("channel") == channel
                             and text in str(c.body.get("text") or "")])

    h.signal_ready(ready, fake.base_url)
    h.serve_asgi(Starlette(routes=[Route("/_bench/cards", cards),
                                   Route("/_bench/count", count),
                                   Route("/_bench/posted", posted)]), port)


def approvers(count: int) -> list[str]:
    return [f"U{i:05d}" for i in range(count)]


# ---------------------------------------------------------------- role: baseline


def run_baseline(port: int, api_url: str) -> None:
    """A Bolt app that only acks: the floor any Bolt-based bot can reach."""
    import re

    from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
    from slack_bolt.async_app import AsyncAck, AsyncApp
    from slack_sdk.web.async_client import AsyncWebClient
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from tests.fakes.slack_api import BOT_TOKEN

    app = AsyncApp(client=AsyncWebClient(token=BOT_TOKEN, base_url=api_url),
                   signing_secret=SECRET)

    async def just_ack(ack: AsyncAck) -> None:
        await ack()

    app.action(re.compile(".*"))(just_ack)
    handler = AsyncSlackRequestHandler(app)

    async def events(request: Request) -> Response:
        return await handler.handle(request)

    async def healthz(_request: Request) -> Response:
        return Response(b"ok")

    h.serve_asgi(Starlette(routes=[Route("/slack/events", events, methods=["POST"]),
                                 Route("/healthz", healthz)]), port)


# ---------------------------------------------------------------- the load client


def write_config(path: Path, database_url: str) -> None:
    import yaml

    path.write_text(yaml.safe_dump({
        "database_url": database_url,
        "agents": {"deploy": {"model": "scripted:deploy", "route": "ops",
                              "starters": {"slack": {"users": [STARTER]}}}},
        "routes": {"ops": {"timeout": "30m", "slack": {
            "channel": CHANNEL, "approvers": {"groups": [GROUP]}}}},
    }))


def signed(body: str) -> h.Call:
    from slack_sdk.signature import SignatureVerifier

    ts = str(int(time.time()))
    return h.Call("/slack/events", body.encode(), {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": SignatureVerifier(SECRET).generate_signature(
            timestamp=ts, body=body)})


def click_body(blocks: list[dict[str, Any]], ts: str, user: str, api_port: str) -> str:
    """``block_actions`` for Approve on the card ``ts`` with its select filled in."""
    buttons = [e for b in blocks if b["type"] == "actions" for e in b["elements"]]
    approve = buttons[0]
    values: dict[str, Any] = {}
    for block in blocks:
        if block["type"] == "input" and block["element"]["type"] == "static_select":
            values[block["block_id"]] = {block["element"]["action_id"]: {
                "type": "static_select", "selected_option": {"value": "o0"}}}
    payload = {
        "type": "block_actions", "user": {"id": user, "name": user.lower()},
        "team": {"id": "T0TEST"}, "api_app_id": "A0APP", "trigger_id": "1.2.3",
        "container": {"type": "message", "message_ts": ts, "channel_id": CHANNEL},
        "channel": {"id": CHANNEL}, "message": {"ts": ts, "blocks": blocks},
        "state": {"values": values},
        "response_url": f"http://127.0.0.1:{api_port}/response_url/bench",
        "actions": [{"type": "button", "action_id": approve["action_id"],
                     "value": approve["value"], "block_id": "b", "action_ts": "1"}],
    }
    return "payload=" + quote(json.dumps(payload), safe="")


class Client:
    """Posts cards through askhuman and builds the clicks on them."""

    def __init__(self, app_url: str, fake_url: str, api_url: str, db: Path) -> None:
        self.app_url, self.fake_url, self.db = app_url, fake_url, db
        self.api_port = api_url.split(":")[2].split("/")[0]
        self.seen: set[str] = set()

    async def new_cards(self, count: int, tag: str) -> list[tuple[str, str, list[Any]]]:
        """Start ``count`` runs with slash commands; ``(ts, ref, blocks)`` of each new card
        once askhuman has recorded its delivery."""
        calls = [signed(urlencode({
            "command": "/askhuman", "text": f"run deploy ship v{tag}.{i}", "user_id": STARTER,
            "user_name": "starter", "channel_id": ORIGIN, "team_id": "T0TEST",
            "response_url": f"http://127.0.0.1:{self.api_port}/response_url/cmd"}))
            for i in range(count)]
        for start in range(0, count, 20):
            await h.burst(self.app_url, calls[start:start + 20])
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            fresh = {m: r for m, r in h.delivered(self.db, "slack").items() if m not in self.seen}
            if len(fresh) >= count:
                with urllib.request.urlopen(self.fake_url + "/_bench/cards") as reply:
                    blocks = json.loads(reply.read())
                self.seen.update(fresh)
                return [(ts, ref, blocks[ts]) for ts, ref in sorted(fresh.items())]
            await asyncio.sleep(0.05)
        raise RuntimeError(f"only {len(fresh)} of {count} cards were posted")

    def click(self, user: str, card: tuple[str, str, list[Any]]) -> h.Call:
        ts, _ref, blocks = card
        return signed(click_body(blocks, ts, user, self.api_port))


def read_ack(_app: str, _body: bytes) -> str:
    return "HTTP 200"  # ``burst`` already refused anything else


async def run_case(case: str, client: Client, apps: dict[str, str], users: list[str],
                   rounds: int, pids: dict[str, int] | None = None) -> list[str]:
    async def prepare(n: int) -> tuple[list[str], h.CallsFor]:
        cards = await client.new_cards(1 if case == "race" else len(users), f"{case}{n}")
        pairs = ([(u, cards[0]) for u in users] if case == "race"
                 else list(zip(users, cards, strict=True)))
        return [ref for _, ref, _ in cards], lambda _app: [client.click(u, c) for u, c in pairs]

    measured = await h.measure_rounds(apps, rounds, client.db, prepare, read_ack,
                                       pids=pids)
    what = "one card, N approvers" if case == "race" else "N cards, one click each"
    lines = h.ratio_table(f"Slack click → ack, {case} ({what}), N = {len(users)}, "
                        f"{rounds} round(s)", measured.latencies, "bare Bolt")
    if measured.cpu:
        lines.append("\n" + measured.cpu_line())
    lines.append("\n" + "; ".join(measured.rounds))
    return lines


async def client_main(clicks: int, rounds: int, cases: list[str]) -> None:
    from tests.fakes.slack_api import BOT_TOKEN

    with tempfile.TemporaryDirectory() as tmp, h.Parties(Path(tmp)) as parties:
        fake_port, app_port, base_port = h.free_port(), h.free_port(), h.free_port()
        fake = parties.role(SCRIPT, "fake", "--port", str(fake_port), "--clicks", str(clicks),
                            "--ready", str(Path(tmp) / "fake.ready"))
        fake.url = f"http://127.0.0.1:{fake_port}"
        api_url = h.wait_file(fake, Path(tmp) / "fake.ready")
        h.wait_http(fake, "/_bench/cards")
        baseline = parties.role(SCRIPT, "baseline", "--port", str(base_port), "--api", api_url)
        baseline.url = f"http://127.0.0.1:{base_port}"
        db, config = Path(tmp) / "askhuman.db", Path(tmp) / "askhuman.yaml"
        write_config(config, f"sqlite:///{db}")
        app = parties.askhuman(config, app_port, {
            "SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SECRET,
            "SLACK_API_URL": api_url})
        h.wait_http(app)
        h.wait_http(baseline)
        client = Client(app.url, fake.url, api_url, db)
        apps = {"askhuman": app.url, "bare Bolt": baseline.url}
        pids = {"askhuman": app.pid, "bare Bolt": baseline.pid}
        for case in cases:
            print("\n".join(await run_case(case, client, apps, approvers(clicks), rounds,
                                            pids)), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=["client", "fake", "baseline"], default="client")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--api", default="", help="(baseline) the fake Web API's URL")
    parser.add_argument("--ready", default="", help="(fake) file to write its URL to")
    parser.add_argument("--clicks", type=int, default=100, help="concurrent clicks per burst")
    parser.add_argument("--rounds", type=int, default=4, help="measured rounds per case")
    parser.add_argument("--cases", default="race,spread", help="race, spread or both")
    ns = parser.parse_args()
    if ns.role == "fake":
        run_fake(ns.port, ns.clicks, Path(ns.ready))
    elif ns.role == "baseline":
        run_baseline(ns.port, ns.api)
    else:
        asyncio.run(client_main(ns.clicks, ns.rounds, ns.cases.split(",")))


if __name__ == "__main__":
    main()
