"""``askhuman serve`` as a real process: DB upgrade, HTTP mode, config errors."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

import httpx

from tests.fakes.asgi_server import free_port
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackAPI
from tests.slack.conftest import APPROVALS, SIGNING_SECRET, sign

CONFIG = f"""
agents:
  deploy: {{model: "scripted:deploy", route: ops, starters: {{slack: {{users: [U0BOB]}}}}}}
routes:
  ops:
    timeout: 30m
    slack:
      channel: {APPROVALS}
      approvers: {{users: [U0ALICE]}}
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    config = tmp_path / "askhuman.yaml"
    config.write_text(CONFIG)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "ASKHUMAN_"))}
    env.update(
        ASKHUMAN_CONFIG=str(config),
        ASKHUMAN_DATABASE_URL=f"sqlite:///{tmp_path / 'serve.db'}",
        SKIP_SLACK_SDK_WARNING="1",
        **extra,
    )
    return env


def test_serve_http_mode_end_to_end(tmp_path: Path) -> None:
    port = free_port()
    with FakeSlackAPI() as fake:
        env = _env(
            tmp_path,
            SLACK_BOT_TOKEN=BOT_TOKEN,
            SLACK_SIGNING_SECRET=SIGNING_SECRET,
            SLACK_API_URL=fake.base_url,
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(300):
                try:
                    if httpx.get(url + "/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.05)
            body = urlencode(
                {
                    "command": "/askhuman",
                    "text": "run deploy ship v9.9.9",
                    "user_id": "U0BOB",
                    "channel_id": "C0ORIGIN",
                    "team_id": "T0TEST",
                    "response_url": fake.response_url("cmd"),
                }
            )
            headers = {"Content-Type": "application/x-www-form-urlencoded", **sign(body)}
            response = httpx.post(url + "/slack/events", content=body, headers=headers)
            assert response.status_code == 200
            for _ in range(300):
                if any(m.blocks for m in fake.messages.values() if m.channel == APPROVALS):
                    break
                time.sleep(0.02)
            else:
                raise AssertionError("no card posted")
        finally:
            proc.terminate()
            output = proc.communicate(timeout=15)[0].decode()
        assert BOT_TOKEN not in output and SIGNING_SECRET not in output
        assert "slack enabled" in output


def test_serve_names_the_missing_secret(tmp_path: Path) -> None:
    env = _env(tmp_path, SLACK_BOT_TOKEN=BOT_TOKEN)
    result = subprocess.run(
        [sys.executable, "-m", "bot.cli", "serve", "--port", str(free_port())],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert b"SLACK_SIGNING_SECRET is not set" in result.stderr
