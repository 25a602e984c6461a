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
from bot.engine import Identity
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


async def test_removed_agents_and_routes_refuse_new_work_while_open_requests_finish(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], tmp_path: Path
) -> None:
    from sqlalchemy import select

    from storage import HumanRequest
    from tests.api.conftest import DEPLOY_ARGS, add_client
    from tests.ops.test_admin_cli import run_row
    from tests.slack.conftest import STARTER

    path = tmp_path / "askhuman.yaml"
    values = ops_config(f"sqlite:///{tmp_path / 'askhuman.db'}")
    path.write_text(yaml.safe_dump(values))
    async with running_door(fake_slack, fake_feishu, load_settings(path)) as ops:
        ci = add_client(ops.database, "ci-bot", ["ops"], ["deploy"])
        ref, ts = await start(ops)  # an open request of agent deploy on route ops

        # Reload without agent deploy and route ops (another agent and route remain).
        fresh = ops_config(f"sqlite:///{tmp_path / 'askhuman.db'}")
        fresh["agents"] = {"other": {**values["agents"]["deploy"], "route": "ops2"}}
        fresh["routes"] = {"ops2": values["routes"]["ops"]}
        path.write_text(yaml.safe_dump(fresh))
        os.kill(os.getpid(), signal.SIGHUP)
        await wait_for(lambda: "other" in ops.engine.settings.agents, "the reload")

        # New work is refused, saying why.
        before = len(fake_slack.response_url_calls)
        await ops.slack.command("run deploy ship v2.0.0")
        await wait_for(lambda: len(fake_slack.response_url_calls) > before, "the reply")
        reply = fake_slack.response_url_calls[before]["text"]
        assert "was removed from the configuration" in reply and "other" in reply
        created = await ops.create(ci, {"route": "ops", "args": DEPLOY_ARGS})
        assert created.status_code == 422 and "was removed" in created.text, created.text
        assert created.json()["type"].endswith("retired-route")
        listed = await ops.engine.startable_agents(Identity("slack", STARTER))
        assert listed == ["other"]

        # The open request still finishes: the decision, the card update, the resume.
        await ops.approve_in_slack(ts)
        await wait_for(lambda: run_row(ops).status == "succeeded", "the resume")
        assert "Deployed v1.0.0" in str(run_row(ops).output)
        with ops.database.transaction() as session:
            assert session.scalars(select(HumanRequest.status).where(
                HumanRequest.ref == ref)).one() == "submitted"
            assert session.query(HumanRequest).count() == 1  # nothing new was asked
        assert "Answered" in str(ops.slack.card_message(ts).blocks)

        # Defining the agent and route again makes them live again.
        path.write_text(yaml.safe_dump(values))
        os.kill(os.getpid(), signal.SIGHUP)
        await wait_for(lambda: ops.engine.settings.agent("deploy") is not None, "re-adding")
        assert not ops.engine.settings.retired_route("ops")
