"""Idle resident memory of one ``askhuman serve`` process, and ``askhuman --help`` time.

``askhuman serve`` is started with the real CLI in its own process (``harness``) four
ways: no chat platform (a console route), Slack over HTTP, Feishu in HTTP-callback mode,
and Feishu over the long connection (``feishu-ws``: the fake has no WebSocket, so the
SDK's client keeps retrying to connect, but it is loaded as in production), each against
its fake API in a process of its own; each on a database already at
the newest schema (a restarted server, the usual case) and on an empty one (the first
start, which migrates: Alembic stays loaded), and once more at the newest schema after
one run of the configured (scripted) agent has asked its question through the API, since
pydantic-ai loads with an agent's first run. Once ``/healthz`` answers and the process
has idled for ``--idle`` seconds, its VmRSS (and its PSS, the share of pages it does not
share with other processes counted in full) is read from ``/proc``.
Each setup is started ``--repeat`` times; the median and the largest are reported.
``askhuman --help`` is timed as a fresh process (``python -m bot.cli --help``).

``--imports N`` starts each setup once more with ``-X importtime``
(``PYTHONPROFILEIMPORTTIME``) and lists the N top-level packages the idle process
imported, by module count and cumulative import time: where to look for weight.

    python benchmarks/idle_rss.py [--repeat 3] [--idle 3] [--imports 15] [--setups feishu]
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

import yaml  # noqa: E402
from harness import (  # noqa: E402
    ROOT,
    Parties,
    child_env,
    free_port,
    rss_mb,
    wait_file,
    wait_http,
)

AGENT = {"model": "scripted:deploy", "route": "ops"}
SETUPS = ("none", "slack", "feishu", "feishu-ws")


def platform_env(parties: Parties, setup: str, tmp: Path) -> tuple[dict[str, str], dict]:
    """Start the fake API ``setup`` needs; askhuman's environment and route."""
    if setup == "none":
        return {}, {"console": {"enabled": True}}
    port = free_port()
    if setup == "slack":
        from tests.fakes.slack_api import BOT_TOKEN

        fake = parties.role("slack_ack.py", "fake", "--port", str(port), "--clicks", "1",
                            "--ready", str(tmp / "slack.ready"), name="fake slack")
        api = wait_file(fake, tmp / "slack.ready")
        return ({"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": "s",
                 "SLACK_API_URL": api},
                {"slack": {"channel": "C0BENCH", "approvers": {"users": ["U00000"]}}})
    app_id = f"cli_rss_{uuid.uuid4().hex[:8]}"
    fake = parties.role("feishu_ack.py", "fake", "--port", str(port), "--app-id", app_id,
                        name="fake feishu")
    fake.url = f"http://127.0.0.1:{port}"
    wait_http(fake, "/")
    return ({"FEISHU_APP_ID": app_id, "FEISHU_APP_SECRET": "bench-app-secret",
             "FEISHU_MODE": "ws" if setup == "feishu-ws" else "http",
             "FEISHU_DOMAIN": fake.url, "FEISHU_ENCRYPT_KEY": "k",
             "FEISHU_VERIFICATION_TOKEN": "t"},
            {"feishu": {"chat_id": "oc_bench_approvals", "approvers": {"users": ["ou_a"]}}})


def pss_mb(pid: int) -> float:
    """Proportional set size of ``pid`` (``smaps_rollup``), in MB."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no Pss for pid {pid}")


def idle_rss(setup: str, idle: float, *, fresh: bool, after_run: bool = False,
             extra_env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """(RSS MB, PSS MB, the process's log) of an idle ``serve`` with ``setup``, started
    on an empty database (``fresh``: it migrates) or on one at the newest schema; with
    ``after_run``, idle again after one agent run (``POST /api/v1/runs``) has asked its
    question: the agent runtime and pydantic-ai are loaded on that first run."""
    with tempfile.TemporaryDirectory() as tmp, Parties(Path(tmp)) as parties:
        env, route = platform_env(parties, setup, Path(tmp))
        env.update(extra_env or {})
        database_url = f"sqlite:///{Path(tmp) / 'askhuman.db'}"
        if not fresh:
            from storage import upgrade

            upgrade(database_url)  # as a restarted server finds it
        config = Path(tmp) / "askhuman.yaml"
        config.write_text(yaml.safe_dump({
            "database_url": database_url,
            "agents": {"deploy": AGENT}, "routes": {"ops": {"timeout": "30m", **route}}}))
        key = api_key(config) if after_run else None
        app = parties.askhuman(config, free_port(), env)
        wait_http(app)
        if key is not None:
            run_once(app.url, key)
        time.sleep(idle)
        app.check()
        return rss_mb(app.pid), pss_mb(app.pid), app.log.read_text(errors="replace")


def api_key(config: Path) -> str:
    """A key that may start the agent (``askhuman api-key create``; the secret key is
    only the CLI's: the server runs without one, webhooks off, as in the idle runs)."""
    env = child_env({"ASKHUMAN_CONFIG": str(config),
                     "ASKHUMAN_SECRET_KEY": "bench-secret-key-0123456789"})
    created = subprocess.run([sys.executable, "-m", "bot.cli", "api-key", "create", "bench",
                              "--routes", "ops", "--agents", "deploy"], env=env, cwd=ROOT,
                             capture_output=True, text=True, check=True)
    found = re.search(r"API key:\s+(\S+)", created.stdout)
    assert found, created.stdout + created.stderr
    return found.group(1)


def run_once(url: str, key: str) -> None:
    """Start one run of the scripted agent and wait until it waits for its human."""
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    body = json.dumps({"agent": "deploy", "prompt": "ship v1.2.3"}).encode()
    request = urllib.request.Request(f"{url}/api/v1/runs", body, headers, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        run = json.load(response)["id"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        request = urllib.request.Request(f"{url}/api/v1/runs/{run}", headers=headers)
        with urllib.request.urlopen(request, timeout=30) as response:
            if json.load(response)["status"] in ("waiting", "succeeded", "failed"):
                return
        time.sleep(0.2)
    raise RuntimeError(f"run {run} did not reach its question in 30 s")


def import_report(log: str, top: int) -> str:
    """The ``-X importtime`` lines of ``log`` summed per top-level package."""
    count: collections.Counter[str] = collections.Counter()
    seconds: collections.Counter[str] = collections.Counter()
    for line in log.splitlines():
        fields = line.removeprefix("import time:").split("|")
        if not line.startswith("import time:") or len(fields) != 3 or "package" in line:
            continue
        name = fields[2].strip()
        package = name.split(".")[0]
        count[package] += 1
        if name == package:  # a top-level import's cumulative time includes its children
            seconds[package] += int(fields[1]) / 1e6
    rows = [f"| {name} | {modules} | {seconds[name] * 1000:.0f} |"
            for name, modules in count.most_common(top)]
    return ("| package | modules | import ms (cumulative) |\n|---|---|---|\n"
            + "\n".join(rows) + f"\n\n{sum(count.values())} modules in all")


def help_seconds() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "bot.cli", "--help"], check=True, cwd=ROOT,
                   env=child_env(), stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--idle", type=float, default=3.0, help="seconds idle before reading")
    parser.add_argument("--imports", type=int, default=0, metavar="N",
                        help="also list the N packages each idle serve imported most")
    parser.add_argument("--setups", nargs="+", default=list(SETUPS), choices=SETUPS)
    ns = parser.parse_args()
    cases = {"at the newest schema": {"fresh": False},
             "empty (migrates)": {"fresh": True},
             "newest schema, after one agent run": {"fresh": False, "after_run": True}}
    print("| `serve` with | database | idle RSS median MB | max MB | PSS median MB |\n"
          "|---|---|---|---|---|")
    for setup in ns.setups:
        for case, options in cases.items():
            sizes = [idle_rss(setup, ns.idle, **options) for _ in range(ns.repeat)]
            rss = [size[0] for size in sizes]
            pss = statistics.median(size[1] for size in sizes)
            print(f"| {setup} | {case} | {statistics.median(rss):.1f} | {max(rss):.1f} | "
                  f"{pss:.1f} |", flush=True)
    for setup in ns.setups if ns.imports else ():
        _, _, log = idle_rss(setup, ns.idle, fresh=False,
                             extra_env={"PYTHONPROFILEIMPORTTIME": "1"})
        print(f"\n`serve` with {setup}:\n\n{import_report(log, ns.imports)}", flush=True)
    times = [help_seconds() for _ in range(ns.repeat + 2)][1:]  # the first warms the disk
    print(f"\n`askhuman --help`: median {statistics.median(times) * 1000:.0f} ms, "
          f"max {max(times) * 1000:.0f} ms ({len(times)} runs)")


if __name__ == "__main__":
    main()
