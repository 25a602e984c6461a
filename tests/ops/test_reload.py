"""Live config reload: SIGHUP swaps a valid config in; a broken one is refused with its
key path logged, and the bot keeps serving with the old config."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import yaml
from typer.testing import CliRunner

from bot.cli import app
from bot.settings import load_settings
from tests.api.conftest import running_door
from tests.fakes.feishu_api import FakeFeishuApi
from tests.fakes.log_capture import captured_logs
from tests.fakes.slack_api import FakeSlackAPI
from tests.ops.conftest import ops_config
from tests.ops.test_admin_cli import start, wait_for


async def test_sighup_reloads_a_valid_config_and_keeps_the_old_one_when_broken(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], tmp_path: Path
) -> None:
    path = tmp_path / "askhuman.yaml"
    pid_file = tmp_path / "askhuman.pid"
    values = ops_config(f"sqlite:///{tmp_path / 'askhuman.db'}")
    path.write_text(yaml.safe_dump(values))
    os.environ["ASKHUMAN_PID_FILE"] = str(pid_file)
    try:
        async with running_door(fake_slack, fake_feishu, load_settings(path)) as ops:
            assert pid_file.read_text().strip() == str(os.getpid())
            # A valid change: a new agent and a new route, no restart.
            values["agents"]["deploy2"] = {**values["agents"]["deploy"], "route": "ops2"}
            values["routes"]["ops2"] = {**values["routes"]["ops"], "timeout": "5m"}
            path.write_text(yaml.safe_dump(values))
            os.kill(os.getpid(), signal.SIGHUP)
            await wait_for(lambda: "deploy2" in ops.engine.settings.agents, "the reload")
            assert ops.engine.settings.routes["ops2"].timeout == 300

            # A broken one: refused, logged with the key path, the old config stays.
            broken = {**values, "routes": {**values["routes"],
                                           "ops2": {"timeout": "soon", "slack": {}}}}
            path.write_text(yaml.safe_dump(broken))
            before = ops.engine.settings
            with captured_logs() as logs:
                os.kill(os.getpid(), signal.SIGHUP)
                await wait_for(lambda: any("reload refused" in m for m in logs.messages()),
                               "the refusal to be logged")
                assert "routes.ops2.timeout" in "\n".join(logs.lines())
            assert ops.engine.settings is before

            # Still serving: a run started after the failed reload gets its card.
            assert (await ops.http.get(ops.url + "/healthz")).status_code == 200
            ref, _ = await start(ops)
            assert ref

            # ``askhuman config reload`` validates first and signals only a valid file.
            bad = await asyncio.to_thread(CliRunner().invoke, app, [
                "config", "reload", "--config", str(path), "--pid-file", str(pid_file)])
            assert bad.exit_code == 1 and "routes.ops2.timeout" in bad.output
            values["routes"]["ops2"]["timeout"] = "10m"
            path.write_text(yaml.safe_dump(values))
            good = await asyncio.to_thread(CliRunner().invoke, app, [
                "config", "reload", "--config", str(path), "--pid-file", str(pid_file)])
            assert good.exit_code == 0, good.output
            await wait_for(lambda: ops.engine.settings.routes["ops2"].timeout == 600,
                           "the CLI-triggered reload")
    finally:
        os.environ.pop("ASKHUMAN_PID_FILE", None)
