"""``askhuman serve`` closes everything it opened when it is stopped (issue 21 part 7).

The real command runs in a child process with Python's development mode on and
``ResourceWarning`` raised as an error, and a garbage collection after it returns
(``gc_child``), so an aiohttp session, a connector, a socket, a file or a database
connection left for the garbage collector prints to stderr. The
test makes a full Slack round trip first (so the pooled Web API session, the Bolt
app, the engine's loops and the agent runtime have all been used), stops the process
with SIGTERM like a supervisor would, and wants exit code 0, the shutdown steps all
done, and nothing unclosed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.fakes.asgi_server import free_port
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackAPI
from tests.slack.conftest import ALICE, APPROVALS, ORIGIN, SIGNING_SECRET, STARTER, Slack

ROOT = Path(__file__).resolve().parents[2]
CONFIG = f"""
agents:
  deploy: {{model: "scripted:deploy", route: ops, starters: {{slack: {{users: [{STARTER}]}}}}}}
routes:
  ops:
    timeout: 30m
    slack:
      channel: {APPROVALS}
      approvers: {{users: [{ALICE}]}}
"""
LEAK_MARKS = ("Unclosed", "ResourceWarning", "Exception ignored", "was never awaited",
              "Task was destroyed")


def _serve(tmp_path: Path, db_url: str, api_url: str, port: int) -> subprocess.Popen[bytes]:
    config = tmp_path / "askhuman.yaml"
    config.write_text(CONFIG)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "ASKHUMAN_"))}
    env.update(
        PYTHONPATH=str(ROOT), PYTHONDEVMODE="1", PYTHONWARNINGS="error::ResourceWarning",
        ASKHUMAN_CONFIG=str(config), ASKHUMAN_DATABASE_URL=db_url,
        SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=api_url,
        SKIP_SLACK_SDK_WARNING="1",
    )
    return subprocess.Popen(
        [sys.executable, "-m", "tests.slack.gc_child", "serve", "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


async def _until(predicate: object, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def _round_trip(fake: FakeSlackAPI, url: str, proc: subprocess.Popen[bytes]) -> None:
    """Start a run, approve its card, and wait for the agent's final answer."""
    async with httpx.AsyncClient(timeout=30) as http:
        deadline = time.monotonic() + 120  # development mode starts slowly on a busy box
        while True:
            assert proc.poll() is None, "serve exited during start-up"
            assert time.monotonic() < deadline, "serve did not answer /healthz"
            try:
                if (await http.get(url + "/healthz")).status_code == 200:
                    break
            except httpx.TransportError:
                await asyncio.sleep(0.1)
        slack = Slack(url=url, fake=fake, engine=None, database=None,  # type: ignore[arg-type]
                      http=http)
        assert (await slack.command("run deploy ship v1.2.3")).status_code == 200
        ts = await slack.wait_for_card(timeout=30)
        assert (await slack.interact(slack.click_payload(ts, "Approve", ALICE))).status_code == 200
        await _until(lambda: [m for m in fake.messages.values()
                              if m.channel == ORIGIN and m.thread_ts], "the final answer")


async def test_serve_stops_on_sigterm_with_nothing_left_open(
    tmp_path: Path, db_url: str
) -> None:
    port = free_port()
    with FakeSlackAPI() as fake:
        fake.add_users([ALICE, STARTER])
        with _serve(tmp_path, db_url, fake.base_url, port) as proc:
            try:
                await _round_trip(fake, f"http://127.0.0.1:{port}", proc)
            finally:
                proc.send_signal(signal.SIGTERM)
                output = proc.communicate(timeout=60)[0].decode(errors="replace")
    assert proc.returncode == 0, output
    assert "shutdown complete" in output, output
    leaks = [line for line in output.splitlines() if any(m in line for m in LEAK_MARKS)]
    assert leaks == [], output
