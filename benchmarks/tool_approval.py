"""Approval click → tool started: how long until an approved tool call runs?

Three processes on 127.0.0.1, like production would have them:

- the fake Slack Web API (``--role fake``);
- askhuman (``--role app``): the real ``serve`` wiring under uvicorn, SQLite, and an
  ``ops`` agent (a scripted pydantic-ai model) whose Python tool
  ``bench_tools:record`` sits behind ``approval: always`` and writes its start time;
- the load client (this process): starts N runs with signed slash commands, waits for
  their approval cards, then sends signed Approve clicks in waves of ``--concurrency``
  and measures, per click, the time from sending the click to the tool starting
  (wall clock, same machine), plus the click's ack latency.

    python benchmarks/tool_approval.py --runs 100 --concurrency 10

The path measured: signature check → durable click → authorize → compare-and-set →
resume queue → worker claims the job → runtime resumes the pydantic-ai run with
``ToolApproved`` → binding check → "tool started" audit commit → the tool.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(BENCH)]
os.environ.setdefault("SKIP_SLACK_SDK_WARNING", "1")

SECRET = "bench-signing-secret"
CHANNEL = "C0BENCH"
ORIGIN = "C0ORIGIN"
APPROVER = "U0APPROVER"
STARTER = "U0STARTER"
TOKEN = "xoxb-bench-token"


# ---------------------------------------------------------------- role: fake Slack


def run_fake(ready: Path) -> None:
    from harness import signal_ready

    from tests.fakes.slack_api import FakeSlackAPI

    with FakeSlackAPI(token=TOKEN) as fake:
        fake.add_users([APPROVER, STARTER])
        fake.channel_members[CHANNEL] = [APPROVER]
        signal_ready(ready, fake.base_url)
        while True:
            time.sleep(3600)


# ---------------------------------------------------------------- role: askhuman


def run_app(fake_url: str, db_url: str, port: int) -> None:
    from harness import serve_asgi
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, UserPromptPart
    from pydantic_ai.models.function import FunctionModel

    from bot.agents import AgentSpec, LocalRuntime
    from bot.commands.serve_cmd import build_app, start_platforms
    from bot.engine.core import Engine
    from bot.settings import Settings
    from storage import Database

    settings = Settings.model_validate({
        "database_url": db_url,
        "agents": {"ops": {"model": "scripted:ops", "route": "ops",
                           "starters": {"slack": {"users": [STARTER]}}, "tools": [
            {"python": "bench_tools:record", "approval": "always"}]}},
        "routes": {"ops": {"timeout": "1h", "slack": {
            "channel": CHANNEL, "approvers": {"users": [APPROVER]}}}},
    })

    def respond(messages: list[Any], info: Any) -> ModelResponse:
        if len(messages) > 1:
            return ModelResponse(parts=[TextPart("done")])
        prompt = next(p.content for p in messages[0].parts if isinstance(p, UserPromptPart))
        return ModelResponse(parts=[ToolCallPart("record", {"tag": str(prompt)})])

    agent = settings.agents["ops"]
    runtime = LocalRuntime(AgentSpec(name="ops", model=agent.model, tools=tuple(agent.tools)),
                           model=FunctionModel(respond))
    database = Database(db_url)
    database.upgrade()
    engine = Engine(database, settings, lambda _name: runtime)
    env = {"SLACK_BOT_TOKEN": TOKEN, "SLACK_SIGNING_SECRET": SECRET, "SLACK_API_URL": fake_url}
    app = build_app(engine, start_platforms(engine, settings, env))
    serve_asgi(app, port)


# ---------------------------------------------------------------- role: load client


def signed(body: str) -> dict[str, str]:
    from slack_sdk.signature import SignatureVerifier

    ts = str(int(time.time()))
    return {"Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": SignatureVerifier(SECRET).generate_signature(
                timestamp=ts, body=body)}


def click_body(ref: str, ts: str) -> str:
    action = f"ah:{ref}:approve"
    payload = {
        "type": "block_actions", "user": {"id": APPROVER, "name": "approver"},
        "team": {"id": "T0TEST"}, "api_app_id": "A0APP", "trigger_id": "1.2.3",
        "container": {"type": "message", "message_ts": ts, "channel_id": CHANNEL},
        "channel": {"id": CHANNEL}, "message": {"ts": ts, "blocks": []},
        "state": {"values": {}}, "response_url": "http://127.0.0.1:9/unused",
        "actions": [{"type": "button", "action_id": action, "value": action,
                     "block_id": "b", "action_ts": "1"}],
    }
    return "payload=" + quote(json.dumps(payload), safe="")


def cards(db_path: Path) -> dict[str, tuple[str, str]]:
    """tag (the run's prompt) → (request ref, card ts) for every delivered approval."""
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT r.prompt, h.ref, d.message_id FROM human_requests h "
            "JOIN runs r ON r.id = h.run_id JOIN deliveries d ON d.request_id = h.id "
            "WHERE h.kind = 'tool_approval'").fetchall()
    return {prompt: (ref, ts) for prompt, ref, ts in rows}


def started_at(journal: Path) -> dict[str, float]:
    if not journal.exists():
        return {}
    out = {}
    for line in journal.read_text().splitlines():
        tag, at = line.rsplit(" ", 1)
        out[tag] = float(at)
    return out


async def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def load(url: str, db_path: Path, journal: Path, runs: int, concurrency: int) -> None:
    import harness as h
    import httpx

    tags = [f"bench-{i:04d}" for i in range(runs)]
    async with httpx.AsyncClient(timeout=30) as client:
        for tag in tags:
            body = urlencode({"command": "/askhuman", "text": f"run ops {tag}",
                              "user_id": STARTER, "user_name": "starter",
                              "channel_id": ORIGIN, "team_id": "T0TEST",
                              "response_url": "http://127.0.0.1:9/unused"})
            (await client.post(url + "/slack/events", content=body,
                               headers=signed(body))).raise_for_status()
        await wait_for(lambda: len(cards(db_path)) >= runs, 300, "all approval cards")
        found = cards(db_path)
        sent: dict[str, float] = {}
        acks: list[float] = []

        async def approve(tag: str) -> None:
            ref, ts = found[tag]
            body = click_body(ref, ts)
            headers = signed(body)
            sent[tag] = time.time()
            t0 = time.perf_counter()
            response = await client.post(url + "/slack/events", content=body, headers=headers)
            acks.append(time.perf_counter() - t0)
            response.raise_for_status()

        for first in range(0, runs, concurrency):
            wave = tags[first:first + concurrency]
            await asyncio.gather(*(approve(tag) for tag in wave))
            await wait_for(lambda w=wave: all(t in started_at(journal) for t in w), 120,  # type: ignore[misc]
                           "the approved tools to start")
    starts = started_at(journal)
    latencies = [starts[t] - sent[t] for t in tags]
    assert len(starts) == runs, "every approved tool ran exactly once"
    print(f"\n{runs} approvals, clicks in waves of {concurrency}, 3 processes on 127.0.0.1 "
          "(SQLite)\n")
    print(f"{'':<28}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}")
    for name, values in (("click ack", acks), ("click -> tool started", latencies)):
        print(f"{name:<28}{statistics.median(values) * 1000:>10.1f}"
              f"{h.pct(values, 0.99) * 1000:>10.1f}{max(values) * 1000:>10.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=["load", "fake", "app"], default="load")
    parser.add_argument("--runs", type=int, default=100, help="approval requests to click")
    parser.add_argument("--concurrency", type=int, default=10, help="clicks sent at once")
    parser.add_argument("--ready", type=Path)
    parser.add_argument("--fake-url")
    parser.add_argument("--db")
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args()
    if options.role == "fake":
        run_fake(options.ready)
        return
    if options.role == "app":
        run_app(options.fake_url, options.db, options.port)
        return
    orchestrate(options.runs, options.concurrency)


def orchestrate(runs: int, concurrency: int) -> None:
    import harness as h

    with tempfile.TemporaryDirectory(prefix="askhuman-bench-") as tmp, \
            h.Parties(Path(tmp)) as parties:
        tmpdir = Path(tmp)
        journal, db_path, ready = tmpdir / "journal.txt", tmpdir / "bench.db", tmpdir / "fake"
        env = {"BENCH_JOURNAL": str(journal)}
        fake = parties.role("tool_approval.py", "fake", "--ready", str(ready), env=env)
        fake_url = h.wait_file(fake, ready, timeout=30)
        port = h.free_port()
        app = parties.role("tool_approval.py", "app", "--fake-url", fake_url,
                           "--db", f"sqlite:///{db_path}", "--port", str(port), env=env)
        app.url = f"http://127.0.0.1:{port}"
        h.wait_http(app)
        asyncio.run(load(app.url, db_path, journal, runs, concurrency))


if __name__ == "__main__":
    main()
