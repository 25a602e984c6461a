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

``--workers 2 4`` also starts ``serve --workers N`` (gunicorn's arbiter, which imports
the SDKs once and forks its workers: ``fork``) and, as the baseline, uvicorn's own
workers, which spawn a fresh interpreter each (``spawn``: the layout ``--workers`` had
before, run as ``uvicorn bot.commands.serve_workers:app --factory --workers N``), on a
database at the newest schema, with every setup but ``feishu-ws`` (a long connection
cannot be shared by workers). Once the N workers beat their heartbeat and the processes
have idled, each process's RSS and PSS are read: RSS counts a shared page in full in
every process that maps it, PSS divides it among them, so the sum of the PSS is what the
layout costs the machine.

``--imports N`` starts each setup once more with ``-X importtime``
(``PYTHONPROFILEIMPORTTIME``) and lists the N top-level packages the idle process
imported, by module count and cumulative import time: where to look for weight.

    python benchmarks/idle_rss.py [--repeat 3] [--idle 3] [--imports 15] [--setups feishu]
        [--workers 2 4 [--only-workers]]
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
    Party,
    child_env,
    free_port,
    query,
    rss_mb,
    wait_file,
    wait_http,
)

AGENT = {"model": "scripted:deploy", "route": "ops"}
SETUPS = ("none", "slack", "feishu", "feishu-ws")
LAYOUTS = ("fork", "spawn")


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
        config = write_config(Path(tmp), route, fresh=fresh)
        key = api_key(config) if after_run else None
        app = parties.askhuman(config, free_port(), env)
        wait_http(app)
        if key is not None:
            run_once(app.url, key)
        time.sleep(idle)
        app.check()
        return rss_mb(app.pid), pss_mb(app.pid), app.log.read_text(errors="replace")


def write_config(tmp: Path, route: dict, *, fresh: bool) -> Path:
    """askhuman's config on ``tmp/askhuman.db``: an empty database (``fresh``) or one at
    the newest schema, as a restarted server finds it."""
    database_url = f"sqlite:///{tmp / 'askhuman.db'}"
    if not fresh:
        from storage import upgrade

        upgrade(database_url)
    config = tmp / "askhuman.yaml"
    config.write_text(yaml.safe_dump({
        "database_url": database_url,
        "agents": {"deploy": AGENT}, "routes": {"ops": {"timeout": "30m", **route}}}))
    return config


def start_workers(parties: Parties, config: Path, env: dict[str, str], workers: int,
                  layout: str) -> Party:
    """``serve --workers N`` (``fork``), or uvicorn's spawned workers on the same
    factory (``spawn``), on a free port."""
    port = free_port()
    if layout == "fork":
        return parties.askhuman(config, port, env, "askhuman", "--workers", str(workers))
    party = parties.spawn("askhuman (uvicorn spawn)", [
        sys.executable, "-m", "uvicorn", "bot.commands.serve_workers:app", "--factory",
        "--workers", str(workers), "--host", "127.0.0.1", "--port", str(port),
        "--log-level", "warning", "--ws", "none"],
        {**env, "ASKHUMAN_CONFIG": str(config), "ASKHUMAN_SERVE_PROCESSES": str(workers),
         "ASKHUMAN_SERVE_LOG_LEVEL": "warning"})
    party.url = f"http://127.0.0.1:{port}"
    return party


def descendants(pid: int) -> list[int]:
    """Every live process under ``pid`` (its workers)."""
    found, stack = [], [pid]
    while stack:
        for task in Path(f"/proc/{stack.pop()}/task").iterdir():
            children = [int(c) for c in (task / "children").read_text().split()]
            found += children
            stack += children
    return found


def idle_workers(setup: str, idle: float, workers: int, layout: str, runs: int = 0
                 ) -> tuple[tuple[float, float], list[tuple[float, float]]]:
    """(RSS, PSS) of the parent and of each worker of an idle ``workers``-process
    layout, once every worker beats its heartbeat and all have idled ``idle`` s; with
    ``runs``, after that many agent runs (``POST /api/v1/runs``, one at a time on new
    connections, so they land on any worker) have asked their questions."""
    with tempfile.TemporaryDirectory() as tmp, Parties(Path(tmp)) as parties:
        env, route = platform_env(parties, setup, Path(tmp))
        config = write_config(Path(tmp), route, fresh=False)
        key = api_key(config) if runs else None
        app = start_workers(parties, config, env, workers, layout)
        wait_http(app, timeout=180)  # N spawned interpreters importing lark-oapi: slow
        deadline = time.monotonic() + 60
        while len(query(Path(tmp) / "askhuman.db",
                        "SELECT id FROM instances WHERE stopped_at IS NULL")) < workers:
            assert time.monotonic() < deadline, f"{workers} workers did not start"
            time.sleep(0.2)
        for _ in range(runs):
            assert key is not None
            run_once(app.url, key)
        time.sleep(idle)
        app.check()
        children = descendants(app.pid)
        return ((rss_mb(app.pid), pss_mb(app.pid)),
                [(rss_mb(pid), pss_mb(pid)) for pid in children])


def workers_table(setups: list[str], counts: list[int], idle: float, repeat: int,
                  runs: int = 0) -> None:
    """Per-process and total RSS and PSS of each layout, medians of ``repeat`` starts
    (after ``runs`` agent runs, see ``idle_workers``)."""
    after = f", after {runs} agent runs" if runs else ""
    print(f"\n| `serve` with{after} | workers | layout | parent RSS / PSS MB | each worker "
          "RSS / PSS MB | total RSS MB | total PSS MB |\n|---|---|---|---|---|---|---|")
    for setup in [s for s in setups if s != "feishu-ws"]:
        for workers in counts:
            for layout in LAYOUTS:
                starts = [idle_workers(setup, idle, workers, layout, runs)
                          for _ in range(repeat)]
                med = statistics.median
                parent = [med(start[0][i] for start in starts) for i in (0, 1)]
                each = [med(size[i] for start in starts for size in start[1]) for i in (0, 1)]
                totals = [med(start[0][i] + sum(size[i] for size in start[1])
                              for start in starts) for i in (0, 1)]
                print(f"| {setup} | {workers} | {layout} | {parent[0]:.1f} / {parent[1]:.1f} "
                      f"| {each[0]:.1f} / {each[1]:.1f} | {totals[0]:.1f} | "
                      f"**{totals[1]:.1f}** |", flush=True)


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
    parser.add_argument("--workers", nargs="+", type=int, default=[], metavar="N",
                        help="also measure `serve --workers N` (forked) against uvicorn's "
                             "spawned workers")
    parser.add_argument("--only-workers", action="store_true",
                        help="skip the one-process table and `--help`")
    parser.add_argument("--worker-runs", type=int, default=0, metavar="N",
                        help="--workers: read the sizes after N agent runs (so each "
                             "worker has loaded the agent runtime), not idle from the start")
    ns = parser.parse_args()
    if ns.only_workers:
        workers_table(ns.setups, ns.workers, ns.idle, ns.repeat, ns.worker_runs)
        return
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
    if ns.workers:
        workers_table(ns.setups, ns.workers, ns.idle, ns.repeat, ns.worker_runs)
    times = [help_seconds() for _ in range(ns.repeat + 2)][1:]  # the first warms the disk
    print(f"\n`askhuman --help`: median {statistics.median(times) * 1000:.0f} ms, "
          f"max {max(times) * 1000:.0f} ms ({len(times)} runs)")


if __name__ == "__main__":
    main()
