"""How fast does an external caller hear about a decision: long-poll and webhook?

The server is the real ``askhuman serve`` in separate processes (one, or two
replicas on PostgreSQL); this process plays Slack (the fake Web API), the external
agent (HTTP client) and the webhook receiver, all on 127.0.0.1. For each request it
creates a request through ``POST /api/v1/requests`` on replica A with a callback URL,
waits for the card, starts ``GET …?wait=60`` on A, then clicks Approve — sent to
replica B when there are two — and measures, from the moment the click is sent:

- the click's ack (Slack's HTTP round trip; the baseline: nothing can be faster),
- the long-poll's answer (the decision → A's waiter, across replicas via NOTIFY),
- the signed webhook's arrival (the decision → the resume queue → the outbox).

    python benchmarks/api_latency.py --requests 50
    python benchmarks/api_latency.py --requests 50 --replicas 2 \\
        --database postgresql+psycopg://askhuman:askhuman@127.0.0.1:5432/askhuman_bench
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
os.environ.setdefault("SKIP_SLACK_SDK_WARNING", "1")

import harness as h  # noqa: E402
import httpx  # noqa: E402
from standardwebhooks import Webhook  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import Response  # noqa: E402
from starlette.routing import Route  # noqa: E402

from tests.fakes.asgi_server import AsgiServer  # noqa: E402
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackAPI  # noqa: E402
from tests.slack.conftest import Slack  # noqa: E402

SIGNING_SECRET = "test-signing-secret"  # what tests.slack.conftest.sign uses
CHANNEL = "C0BENCH"
ALICE = "U0ALICE"
ARGS = {
    "question": "Deploy?",
    "fields": [{"type": "select", "name": "environment", "label": "Environment",
                "options": [{"value": "staging", "label": "Staging"},
                            {"value": "production", "label": "Production"}]}],
    "actions": [{"id": "approve", "label": "Approve", "style": "primary"}],
}


class Receiver:
    """Webhook receiver in a thread: the monotonic arrival time per ref (verified)."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.secret = ""
        self.lock = threading.Lock()

    def app(self) -> Starlette:
        async def hook(request: Request) -> Response:
            body = await request.body()
            now = time.monotonic()
            event = Webhook(self.secret).verify(body, dict(request.headers))
            with self.lock:
                self.arrived.setdefault(event["data"]["ref"], now)
            return Response(status_code=204)

        return Starlette(routes=[Route("/hook", hook, methods=["POST"])])

    async def wait(self, ref: str, timeout: float = 30.0) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if ref in self.arrived:
                    return self.arrived[ref]
            await asyncio.sleep(0.001)
        raise TimeoutError(f"no webhook for {ref}")


def write_config(directory: Path, database: str) -> Path:
    path = directory / "askhuman.yaml"
    path.write_text(
        f"database_url: {database}\n"
        "agents: {deploy: {model: 'scripted:deploy', route: ops}}\n"
        "routes:\n"
        f"  ops: {{timeout: 30m, slack: {{channel: {CHANNEL}, "
        f"approvers: {{users: [{ALICE}]}}}}}}\n"
        "api: {callback_hosts: ['127.0.0.1'], rate_limit: 100000}\n")
    return path


async def card_ts(fake: FakeSlackAPI, ref: str) -> str:
    for _ in range(20000):
        for message in list(fake.messages.values()):
            if message.channel == CHANNEL and message.blocks and ref in str(message.blocks):
                return str(message.ts)
        await asyncio.sleep(0.001)
    raise TimeoutError(f"no card for {ref}")


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp, FakeSlackAPI(token=BOT_TOKEN) as fake:
        fake.add_users([ALICE])
        directory = Path(tmp)
        database = args.database or f"sqlite:///{directory / 'bench.db'}"
        config = write_config(directory, database)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "ASKHUMAN_CONFIG": str(config),
               "ASKHUMAN_SECRET_KEY": "bench-secret-key-0123456789",
               "SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET,
               "SLACK_API_URL": fake.base_url, "SKIP_SLACK_SDK_WARNING": "1"}
        env.pop("SLACK_APP_TOKEN", None)
        created = subprocess.run(
            [sys.executable, "-m", "bot.cli", "api-key", "create", f"bench{os.getpid()}",
             "--routes", "ops"], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
        key = re.search(r"API key:\s+(\S+)", created.stdout)
        secret = re.search(r"Webhook secret:\s+(\S+)", created.stdout)
        assert key and secret, created.stdout + created.stderr
        receiver = Receiver()
        receiver.secret = secret.group(1)
        platform = {k: v for k, v in env.items() if k.startswith(("ASKHUMAN_SECRET", "SLACK_"))}
        with h.Parties(directory) as parties, AsgiServer(receiver.app()) as hooks:
            servers = [parties.askhuman(config, h.free_port(), platform, name=f"askhuman {i}")
                       for i in range(args.replicas)]
            for server in servers:
                h.wait_http(server)
            await measure(args, fake, [server.url for server in servers], key.group(1),
                          hooks.url + "/hook", receiver)


async def measure(args: argparse.Namespace, fake: FakeSlackAPI, urls: list[str], key: str,
                  callback: str, receiver: Receiver) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    acks: list[float] = []
    polls: list[float] = []
    hooks: list[float] = []
    creates: list[float] = []
    reads: list[float] = []
    async with httpx.AsyncClient(timeout=90) as http:
        clicker = Slack(url=urls[-1], fake=fake, engine=None, database=None,  # type: ignore[arg-type]
                        http=http)
        for index in range(args.warmup + args.requests):
            posted = time.monotonic()
            response = await http.post(urls[0] + "/api/v1/requests", headers=headers,
                                       json={"route": "ops", "args": ARGS,
                                             "callback_url": callback})
            response.raise_for_status()
            created = time.monotonic() - posted
            ref = response.json()["ref"]
            ts = await card_ts(fake, ref)
            payload = clicker.click_payload(ts, "Approve", ALICE, environment="o1",
                                            channel=CHANNEL)
            poll = asyncio.create_task(http.get(urls[0] + f"/api/v1/requests/{ref}",
                                                params={"wait": 60}, headers=headers))
            await asyncio.sleep(0.05)  # the waiter is registered on replica A
            sent = time.monotonic()
            ack = await clicker.interact(payload)
            acked = time.monotonic()
            assert ack.status_code == 200, ack.text
            answer = await poll
            answered = time.monotonic()
            assert answer.json()["status"] == "submitted", answer.text
            arrived = await receiver.wait(ref)
            read = time.monotonic()
            got = await http.get(urls[0] + f"/api/v1/requests/{ref}", headers=headers)
            got.raise_for_status()
            if index >= args.warmup:
                acks.append(acked - sent)
                polls.append(answered - sent)
                hooks.append(arrived - sent)
                creates.append(created)
                reads.append(time.monotonic() - read)
    report(args, acks, polls, hooks)
    report_calls(creates, reads)


def report(args: argparse.Namespace, acks: list[float], polls: list[float],
           hooks: list[float]) -> None:
    where = "two replicas, PostgreSQL" if args.replicas == 2 else (
        "one process, " + ("PostgreSQL" if args.database else "SQLite"))
    print(f"{len(polls)} decisions, {where}; ms from the click being sent:")
    print(f"{'':28}{'p50':>8}{'p99':>8}{'max':>8}")
    for name, values in (("Slack click ack", acks), ("long-poll answer", polls),
                         ("webhook delivered", hooks)):
        ms = [v * 1000 for v in values]
        print(f"{name:28}{statistics.median(ms):8.1f}{h.pct(ms, 0.99):8.1f}"
              f"{max(ms):8.1f}")


def report_calls(creates: list[float], reads: list[float]) -> None:
    print("API calls on replica A (key check + rate limit + work), ms:")
    print(f"{'':28}{'p50':>8}{'p99':>8}{'max':>8}")
    for name, values in (("POST /requests", creates), ("GET /requests/{ref}", reads)):
        ms = [v * 1000 for v in values]
        print(f"{name:28}{statistics.median(ms):8.1f}{h.pct(ms, 0.99):8.1f}"
              f"{max(ms):8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--replicas", type=int, choices=(1, 2), default=1)
    parser.add_argument("--database", help="default: a temporary SQLite file; two replicas "
                                           "need PostgreSQL")
    args = parser.parse_args()
    if args.replicas == 2 and not (args.database or "").startswith("postgresql"):
        parser.error("--replicas 2 needs --database postgresql+psycopg://…")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
