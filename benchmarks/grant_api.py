"""Black box: ``POST /api/v1/approvals`` answered by a standing grant (issue 19, "Speed").

Every party in its own process, as in production:

* askhuman: the real ``askhuman serve`` CLI on SQLite (or ``--database`` PostgreSQL),
  a route that allows grants, an API key made with ``askhuman api-key create``;
* the baseline (``--role baseline``): a bare Starlette app that reads the bearer key
  and the JSON body and answers ``{"status": "submitted"}`` (what any HTTP service
  in Python pays for one JSON round trip), served by ``harness.serve_asgi`` with
  exactly the uvicorn settings ``askhuman serve`` uses;
* the fake Slack Web API (``slack_ack.py --role fake``): idle here, since a call a
  grant answers posts no card; it is there because the route delivers to Slack;
* the load client: this script.

One grant with uses to spare is stored before the rounds, as a click on "Approve and
allow similar…" stores it (``grant_rows.create``). Each round, the two apps take turns
(the order alternates): ``--sequential`` calls one at a time on a kept-alive
connection (an idle server), then a burst of ``--concurrency`` calls at once (a
connection each). Every askhuman answer must say ``submitted`` (approved by the
grant; a card would mean the grant was not used). Before the next round askhuman must
have nothing left to do (resume queue settled).

    python benchmarks/grant_api.py --concurrency 200 --sequential 100 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
os.environ.setdefault("SKIP_SLACK_SDK_WARNING", "1")

import harness as h  # noqa: E402

TOOL, ARGS = "restart_service", {"service": "web"}
CLIENT = "bench"
CHANNEL = "C0BENCH"
ALICE = "U0ALICE"
SIGNING_SECRET = "test-signing-secret"
BASELINE_KEY = "baseline-key"


# ---------------------------------------------------------------- role: baseline


def run_baseline(port: int) -> None:
    """A bare JSON endpoint: the floor of one authenticated POST in Python."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    async def approvals(request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {BASELINE_KEY}":
            return JSONResponse({"title": "unauthorized"}, status_code=401)
        body = await request.json()
        return JSONResponse({"status": "submitted", "tool_name": body.get("tool_name"),
                             "decision": {"approved": True, "reason": "Approved."}})

    async def healthz(_request: Request) -> Response:
        return JSONResponse({"ok": True})

    h.serve_asgi(Starlette(routes=[Route("/api/v1/approvals", approvals, methods=["POST"]),
                                   Route("/healthz", healthz)]), port)


# ---------------------------------------------------------------- the client


def write_config(directory: Path, database: str) -> Path:
    path = directory / "askhuman.yaml"
    path.write_text(
        f"database_url: {database}\n"
        "agents: {deploy: {model: 'scripted:deploy', route: ops}}\n"
        "routes:\n"
        f"  ops: {{timeout: 30m, grants: {{max_duration: 8h, max_uses: 1000000}}, "
        f"slack: {{channel: {CHANNEL}, approvers: {{users: [{ALICE}]}}}}}}\n"
        "api: {rate_limit: 1000000}\n")
    return path


def seed_grant(database: str) -> None:
    """The grant a click on "Approve and allow similar…" would store."""
    from bot.engine import grant_rows
    from bot.engine.ports import Identity
    from bot.tools.binding import binding_hash
    from storage import Database

    db = Database(database)
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    granted = grant_rows.Granted(route="ops", agent=CLIENT, tool=TOOL, scope=None,
                                 args=dict(ARGS), binding=binding_hash(TOOL, ARGS, {}),
                                 request_ref="bench", run_id=None)
    with db.transaction() as session:
        grant_rows.create(session, now, granted, grant_rows.Terms(8 * 3600, 1_000_000),
                          [Identity("slack", ALICE, "Alice")])
    db.dispose()


def make_key(env: dict[str, str]) -> str:
    created = subprocess.run(
        [sys.executable, "-m", "bot.cli", "api-key", "create", CLIENT, "--routes", "ops"],
        env=h.child_env(env), cwd=ROOT, capture_output=True, text=True, check=True)
    found = re.search(r"API key:\s+(\S+)", created.stdout)
    assert found, created.stdout + created.stderr
    return found.group(1)


def call(key: str) -> h.Call:
    body = json.dumps({"route": "ops", "tool_name": TOOL, "args": ARGS}).encode()
    return h.Call("/api/v1/approvals", body, {"Authorization": f"Bearer {key}",
                                              "Content-Type": "application/json"})


async def sequential(url: str, one: h.Call, count: int) -> tuple[list[float], list[bytes]]:
    """``count`` calls one after another on one kept-alive connection."""
    import aiohttp

    times: list[float] = []
    bodies: list[bytes] = []
    async with aiohttp.ClientSession() as client:
        for _ in range(count):
            started = time.perf_counter()
            async with client.post(url + one.path, data=one.body, headers=one.headers) as r:
                raw = await r.read()
                times.append(time.perf_counter() - started)
                if r.status // 100 != 2:
                    raise RuntimeError(f"HTTP {r.status}: {raw[:200]!r}")
            bodies.append(raw)
    return times, bodies


def approved(bodies: list[bytes]) -> int:
    return sum(1 for b in bodies if json.loads(b).get("status") == "submitted")


async def wait_idle(db: Path | None, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while db is not None and h.busy(db) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


async def client_main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp, h.Parties(Path(tmp)) as parties:
        directory = Path(tmp)
        db_file = directory / "bench.db"
        database = args.database or f"sqlite:///{db_file}"
        ready = directory / "fake.url"
        parties.role("slack_ack.py", "fake", "--port", str(h.free_port()), "--clicks", "1",
                     "--ready", str(ready))
        fake_url = h.wait_file(parties.started[-1], ready)
        config = write_config(directory, database)
        env = {"ASKHUMAN_CONFIG": str(config), "ASKHUMAN_SECRET_KEY": "bench-secret-0123456789",
               "SLACK_BOT_TOKEN": "xoxb-bench", "SLACK_SIGNING_SECRET": SIGNING_SECRET,
               "SLACK_API_URL": fake_url}
        key = make_key(env)
        app = parties.askhuman(config, h.free_port(), env)
        base = parties.role(Path(__file__).name, "baseline", "--port", str(port := h.free_port()))
        base.url = f"http://127.0.0.1:{port}"
        h.wait_http(app)
        h.wait_http(base)
        seed_grant(database)
        await measure(args, {"askhuman": (app, call(key)), "baseline": (base, call(BASELINE_KEY))},
                      None if args.database else db_file)


async def measure(args: argparse.Namespace, apps: dict[str, tuple[h.Party, h.Call]],
                  db: Path | None) -> None:
    idle: dict[str, list[float]] = {name: [] for name in apps}
    burst: dict[str, list[float]] = {name: [] for name in apps}
    cpu: dict[str, float] = dict.fromkeys(apps, 0.0)
    for party, one in apps.values():  # warm-up, not counted
        await sequential(party.url, one, 20)
        await h.burst(party.url, [one] * 20)
    await wait_idle(db)
    for round_no in range(args.rounds):
        for name in h.interleaved(round_no, list(apps)):
            party, one = apps[name]
            before = h.cpu_seconds(party.pid)
            times, bodies = await sequential(party.url, one, args.sequential)
            assert approved(bodies) == len(bodies), f"{name}: not every call was approved"
            idle[name] += times
            times, bodies = await h.burst(party.url, [one] * args.concurrency)
            assert approved(bodies) == len(bodies), f"{name}: not every call was approved"
            cpu[name] += h.cpu_seconds(party.pid) - before
            burst[name] += times
            await wait_idle(db)
            await asyncio.sleep(0.5)
    where = "PostgreSQL" if args.database else "SQLite"
    print(f"POST /api/v1/approvals answered by a standing grant, {where}, "
          f"{args.rounds} round(s)")
    for line in h.ratio_table(f"one at a time ({args.sequential} per round)", idle, "baseline"):
        print(line)
    for line in h.ratio_table(f"{args.concurrency} at once", burst, "baseline"):
        print(line)
    calls = args.rounds * (args.sequential + args.concurrency)
    print("\nCPU per call (server process, all threads): "
          + ", ".join(f"{n} {cpu[n] / calls * 1000:.2f} ms" for n in apps))
    print("throughput in the bursts: " + ", ".join(
        f"{n} {args.concurrency / statistics.median(_burst_spans(burst[n], args)):.0f}/s"
        for n in apps))


def _burst_spans(times: list[float], args: argparse.Namespace) -> list[float]:
    """The slowest call of each burst: how long the whole burst took."""
    size = args.concurrency
    return [max(times[i:i + size]) for i in range(0, len(times), size)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=["client", "baseline"], default="client")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--sequential", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database", default=None, help="default: SQLite in a temp dir")
    ns = parser.parse_args()
    if ns.role == "baseline":
        run_baseline(ns.port)
    else:
        asyncio.run(client_main(ns))


if __name__ == "__main__":
    main()
