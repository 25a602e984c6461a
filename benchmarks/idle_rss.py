"""Idle resident memory of one ``askhuman serve`` process, and ``askhuman --help`` time.

``askhuman serve`` is started with the real CLI in its own process (``harness``) three
ways: no chat platform (a console route), Slack over HTTP, and Feishu in HTTP-callback
mode, each against its fake API in a process of its own. Once ``/healthz`` answers
and the process has idled for ``--idle`` seconds, its VmRSS is read from ``/proc``.
Each setup is started ``--repeat`` times; the median and the largest are reported.
``askhuman --help`` is timed as a fresh process (``python -m bot.cli --help``).

    python benchmarks/idle_rss.py [--repeat 3] [--idle 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
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
             "FEISHU_MODE": "http", "FEISHU_DOMAIN": fake.url, "FEISHU_ENCRYPT_KEY": "k",
             "FEISHU_VERIFICATION_TOKEN": "t"},
            {"feishu": {"chat_id": "oc_bench_approvals", "approvers": {"users": ["ou_a"]}}})


def idle_rss(setup: str, idle: float) -> float:
    with tempfile.TemporaryDirectory() as tmp, Parties(Path(tmp)) as parties:
        env, route = platform_env(parties, setup, Path(tmp))
        config = Path(tmp) / "askhuman.yaml"
        config.write_text(yaml.safe_dump({
            "database_url": f"sqlite:///{Path(tmp) / 'askhuman.db'}",
            "agents": {"deploy": AGENT}, "routes": {"ops": {"timeout": "30m", **route}}}))
        app = parties.askhuman(config, free_port(), env)
        wait_http(app)
        time.sleep(idle)
        app.check()
        return rss_mb(app.pid)


def help_seconds() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "bot.cli", "--help"], check=True, cwd=ROOT,
                   env=child_env(), stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--idle", type=float, default=3.0, help="seconds idle before reading")
    ns = parser.parse_args()
    print("| `serve` with | idle RSS median MB | max MB |\n|---|---|---|")
    for setup in ("none", "slack", "feishu"):
        sizes = [idle_rss(setup, ns.idle) for _ in range(ns.repeat)]
        print(f"| {setup} | {statistics.median(sizes):.1f} | {max(sizes):.1f} |", flush=True)
    times = [help_seconds() for _ in range(ns.repeat + 2)][1:]  # the first warms the disk
    print(f"\n`askhuman --help`: median {statistics.median(times) * 1000:.0f} ms, "
          f"max {max(times) * 1000:.0f} ms ({len(times)} runs)")


if __name__ == "__main__":
    main()
