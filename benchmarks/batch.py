"""A batch of 20 approvals: "Approve selected" → all 20 cards updated.

Three processes on 127.0.0.1 (``harness.py``):

* the fake Slack Web API (``--role fake``), which notes the arrival time (wall clock)
  of every ``chat.update`` and ``response_url`` call, read by the client through
  ``/_bench/updates``;
* askhuman: the real ``askhuman serve`` CLI, SQLite, one ``ops`` route, the HTTP API
  door (an API key made with ``askhuman api-key create``);
* the load client (this script): per round, asks 20 tool approvals through
  ``POST /api/v1/approvals``, waits for their cards and for askhuman to be idle, then
  sends one signed "Approve selected" click naming all 20 (the list's two checkbox
  groups of 10) and measures, from the moment the click is sent: the ack (HTTP
  response), the clicker's answer (the ``response_url`` call that replaces the list)
  and the last of the 20 card updates (``chat.update``). Every request must be decided
  exactly once (one ``decided`` audit row each).

    python benchmarks/batch.py --rounds 15
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(BENCH)]
os.environ.setdefault("SKIP_SLACK_SDK_WARNING", "1")

import harness as h  # noqa: E402

SECRET = "bench-signing-secret"
CHANNEL = "C0BENCH"
APPROVER = "U0APPROVER"
SCRIPT = "batch.py"
BATCH = 20


# ---------------------------------------------------------------- role: fake Slack


def run_fake(port: int, ready: Path) -> None:
    """The fake Web API, noting when each card update and answer arrives."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from tests.fakes.slack_api import FakeSlackAPI

    updates: dict[str, float] = {}
    answers: list[float] = []

    class Timed(FakeSlackAPI):
        def _m_chat_update(self, body: Any) -> dict[str, Any]:
            result = super()._m_chat_update(body)
            updates[str(body.get("ts"))] = time.time()
            return result

        async def _handle_response_url(self, request: Any) -> Any:
            answer = await super()._handle_response_url(request)
            answers.append(time.time())
            return answer

    fake = Timed().start()
    fake.add_users([APPROVER])
    fake.channel_members[CHANNEL] = [APPROVER]

    async def seen(_request: Request) -> JSONResponse:
        return JSONResponse({"updates": dict(updates), "answers": list(answers)})

    h.signal_ready(ready, fake.base_url)
    h.serve_asgi(Starlette(routes=[Route("/_bench/updates", seen)]), port)


# ---------------------------------------------------------------- role: load client


def write_config(path: Path, database: str) -> None:
    path.write_text(
        f"database_url: {database}\n"
        "agents: {deploy: {model: 'scripted:deploy', route: ops}}\n"
        "routes:\n"
        f"  ops: {{timeout: 1h, slack: {{channel: {CHANNEL}, "
        f"approvers: {{users: [{APPROVER}]}}}}}}\n"
        "api: {rate_limit: 100000}\n")


def signed(body: str) -> dict[str, str]:
    from slack_sdk.signature import SignatureVerifier

    ts = str(int(time.time()))
    return {"Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": SignatureVerifier(SECRET).generate_signature(
                timestamp=ts, body=body)}


def batch_body(refs: list[str], response_url: str) -> str:
    """The "Approve selected" click as Slack sends it from the ephemeral list."""
    groups = [refs[i:i + 10] for i in range(0, len(refs), 10)]
    values = {f"ahb_sel:{n}": {"in": {"type": "checkboxes", "selected_options": [
        {"value": ref, "text": {"type": "plain_text", "text": "?"}} for ref in group]}}
        for n, group in enumerate(groups)}
    payload = {
        "type": "block_actions", "user": {"id": APPROVER, "name": "approver",
                                          "team_id": "T0TEST"},
        "team": {"id": "T0TEST"}, "api_app_id": "A0APP", "trigger_id": "1.2.3",
        "container": {"type": "message", "message_ts": "1.1", "channel_id": "D0LIST",
                      "is_ephemeral": True},
        "channel": {"id": "D0LIST"}, "state": {"values": values},
        "response_url": response_url,
        "actions": [{"type": "button", "action_id": "ahb:approve", "value": "approve",
                     "block_id": "ahb_go", "action_ts": "1"}],
    }
    return "payload=" + quote(json.dumps(payload), safe="")


def seen(fake_url: str) -> dict[str, Any]:
    with urllib.request.urlopen(fake_url + "/_bench/updates") as reply:
        return dict(json.loads(reply.read()))


async def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


async def one_round(http: Any, app_url: str, fake_url: str, api_url: str, key: str,
                    db: Path, n: int) -> tuple[float, float, float]:
    refs = []
    for i in range(BATCH):
        response = await http.post(app_url + "/api/v1/approvals",
                                   headers={"Authorization": f"Bearer {key}"},
                                   json={"route": "ops", "tool_name": f"job_{n}_{i}",
                                         "args": {"n": i}})
        response.raise_for_status()
        refs.append(response.json()["ref"])
    await wait_for(lambda: set(refs) <= set(h.delivered(db, "slack").values()), 60,
                   "the cards")
    await wait_for(lambda: not h.busy(db), 60, "askhuman to be idle")
    ts_of = {ref: ts for ts, ref in h.delivered(db, "slack").items() if ref in refs}
    answers_before = len(seen(fake_url)["answers"])
    body = batch_body(refs, api_url.replace("/api/", f"/response_url/batch{n}"))
    headers = signed(body)
    sent = time.time()
    response = await http.post(app_url + "/slack/events", content=body, headers=headers)
    acked = time.time()
    response.raise_for_status()

    def done() -> bool:
        now = seen(fake_url)
        return (all(ts_of[r] in now["updates"] and now["updates"][ts_of[r]] >= sent
                    for r in refs) and len(now["answers"]) > answers_before)

    await wait_for(done, 60, "all 20 cards updated and the answer")
    now = seen(fake_url)
    last_update = max(now["updates"][ts_of[r]] for r in refs)
    answer = now["answers"][answers_before]
    counts = await h.settle(db, refs)
    assert set(counts.values()) == {1}, f"not exactly once: {counts}"
    return acked - sent, answer - sent, last_update - sent


async def client_main(rounds: int, warmup: int) -> None:
    import httpx

    from tests.fakes.slack_api import BOT_TOKEN

    with tempfile.TemporaryDirectory(prefix="askhuman-bench-") as tmp, \
            h.Parties(Path(tmp)) as parties:
        fake_port, app_port = h.free_port(), h.free_port()
        fake = parties.role(SCRIPT, "fake", "--port", str(fake_port),
                            "--ready", str(Path(tmp) / "fake.ready"))
        fake.url = f"http://127.0.0.1:{fake_port}"
        api_url = h.wait_file(fake, Path(tmp) / "fake.ready")
        h.wait_http(fake, "/_bench/updates")
        db, config = Path(tmp) / "askhuman.db", Path(tmp) / "askhuman.yaml"
        write_config(config, f"sqlite:///{db}")
        env = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SECRET,
               "SLACK_API_URL": api_url, "ASKHUMAN_SECRET_KEY": "bench-secret-key-0123456789"}
        created = subprocess.run(
            [sys.executable, "-m", "bot.cli", "api-key", "create", "bench", "--routes", "ops",
             "--config", str(config)], env=h.child_env(env), cwd=ROOT, capture_output=True,
            text=True, check=True)
        key = re.search(r"API key:\s+(\S+)", created.stdout)
        assert key, created.stdout + created.stderr
        app = parties.askhuman(config, app_port, env)
        h.wait_http(app)
        acks, answers, cards = [], [], []
        async with httpx.AsyncClient(timeout=60) as http:
            for n in range(warmup + rounds):
                ack, answer, last = await one_round(http, app.url, fake.url, api_url,
                                                    key.group(1), db, n)
                if n >= warmup:
                    acks.append(ack)
                    answers.append(answer)
                    cards.append(last)
    report(rounds, acks, answers, cards)


def report(rounds: int, acks: list[float], answers: list[float], cards: list[float]) -> None:
    print(f"\nA batch of {BATCH} approvals, {rounds} rounds, 3 processes on 127.0.0.1 "
          "(SQLite); ms from the click being sent:\n")
    print(f"{'':34}{'p50':>8}{'p99':>8}{'max':>8}")
    for name, values in (("ack (20 clicks stored)", acks),
                         ("answer replaces the list", answers),
                         ("all 20 cards updated", cards)):
        ms = [v * 1000 for v in values]
        print(f"{name:34}{statistics.median(ms):8.1f}{h.pct(ms, 0.99):8.1f}{max(ms):8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=["client", "fake"], default="client")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready", default="")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=2)
    ns = parser.parse_args()
    if ns.role == "fake":
        run_fake(ns.port, Path(ns.ready))
    else:
        asyncio.run(client_main(ns.rounds, ns.warmup))


if __name__ == "__main__":
    main()
