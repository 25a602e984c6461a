"""``serve --workers N``'s parent (gunicorn's arbiter with ``preload_app``) imports the
SDKs the config uses, freezes that heap and forks: it must hold nothing a worker may
not inherit. Each case runs the arbiter's load in a fresh interpreter, as the parent
does before its first fork, and reads the process's threads and open files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

LOAD = """
import gc, json, os, sys, threading
from bot.commands import forked_workers, http_stack, serve_workers
from bot.settings import load_settings

def open_files():
    found = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            found[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except FileNotFoundError:  # the listing's own
            pass
    return found

settings = load_settings(sys.argv[1])
before = open_files()
arbiter = forked_workers.Arbiter(serve_workers.app, settings, os.environ,
    forked_workers.options(host="127.0.0.1", port=1, workers=2,
                           uvicorn=http_stack.uvicorn_options("info")))
loaded = arbiter.wsgi()  # what gunicorn's arbiter calls before forking (preload_app)
print(json.dumps({
    "factory": loaded is serve_workers.app,
    "modules": sorted({name.split(".")[0] for name in sys.modules}),
    "frozen": gc.get_freeze_count(), "collecting": gc.isenabled(),
    "threads": threading.active_count(),
    "new_fds": sorted(set(open_files().items()) - set(before.items())),
}))
"""

SLACK = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": "s"}
FEISHU = {"FEISHU_APP_ID": "cli_a", "FEISHU_APP_SECRET": "s3cret-value",
          "FEISHU_MODE": "http", "FEISHU_ENCRYPT_KEY": "k", "FEISHU_VERIFICATION_TOKEN": "t"}


def _load(tmp_path: Path, platform_env: dict[str, str], *, agents: bool = False
          ) -> dict[str, object]:
    config = tmp_path / "askhuman.yaml"
    config.write_text(yaml.safe_dump({
        "database_url": f"sqlite:///{tmp_path / 'a.db'}",
        "routes": {"ops": {"timeout": "30m", "console": {"enabled": True}}},
        **({"agents": {"deploy": {"model": "scripted:deploy", "route": "ops"}}}
           if agents else {})}))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLACK_", "FEISHU_", "ASKHUMAN_", "OTEL_"))}
    done = subprocess.run([sys.executable, "-c", LOAD, str(config)], cwd=ROOT,
                          env={**env, **platform_env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return loaded


@pytest.mark.parametrize(("platform_env", "agents", "sdks", "not_loaded"), [
    ({}, False, [], ["slack_bolt", "lark_oapi", "pydantic_ai"]),
    (SLACK, False, ["slack_bolt", "slack_sdk"], ["lark_oapi", "pydantic_ai"]),
    ({**SLACK, **FEISHU}, True, ["slack_bolt", "lark_oapi", "pydantic_ai"], []),
])
def test_the_parent_preloads_the_configured_sdks_and_forks_holding_nothing(
    tmp_path: Path, platform_env: dict[str, str], agents: bool, sdks: list[str],
    not_loaded: list[str],
) -> None:
    loaded = _load(tmp_path, platform_env, agents=agents)
    modules = loaded["modules"]
    assert isinstance(modules, list)
    # What every worker's app imports is in the parent, shared by the forks.
    assert {"sqlalchemy", "starlette", "storage", "sqlite3", *sdks} <= set(modules)
    assert not set(not_loaded) & set(modules), "an SDK the config does not use"
    # The workers' collectors will not write to those pages; the parent still collects.
    assert loaded["frozen"] and loaded["collecting"]
    assert loaded["factory"], "the workers build their apps themselves, after the fork"
    # Nothing that must not cross a fork: no thread, no database file, lock or socket.
    assert loaded["threads"] == 1
    assert loaded["new_fds"] == []
    assert not list(tmp_path.glob("a.db*")), "the preload touched the database"


@pytest.mark.parametrize(("http", "loop"), [("h11", "asyncio"), ("httptools", "uvloop")])
def test_forked_workers_serve_with_the_parser_and_loop_serve_would(http: str, loop: str) -> None:
    from bot.commands import forked_workers, http_stack

    if not (http_stack.installed(http) or http == "h11") or not (
            http_stack.installed(loop) or loop == "asyncio"):
        pytest.skip(f"{http}/{loop} not installed here")
    uvicorn = http_stack.uvicorn_options("warning", http=http, loop=loop)
    settings = forked_workers.options(host="127.0.0.1", port=1, workers=2, uvicorn=uvicorn)
    worker = settings["worker_class"]
    assert issubclass(worker, forked_workers.Worker)
    assert worker.CONFIG_KWARGS["http"] == http and worker.CONFIG_KWARGS["loop"] == loop
    assert worker.CONFIG_KWARGS["ws"] == "none"
    assert settings["loglevel"] == "warning"
