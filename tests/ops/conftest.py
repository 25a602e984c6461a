"""The operator's side on a served system: Slack and Feishu fakes, the real serve app.

``ops`` starts the scripted ``deploy`` agent from Slack; its route ``ops`` posts the
card to Slack and Feishu. ``config`` is the YAML file the admin commands read (the
same config and database the served app uses).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.settings import Settings
from tests.api import conftest as door_fixtures
from tests.api.conftest import FEISHU_ALICE, FEISHU_APPROVALS, Door, running_door
from tests.fakes.feishu_api import FakeFeishuApi
from tests.fakes.slack_api import FakeSlackAPI
from tests.slack.conftest import ALICE, APPROVALS, STARTER

fake_slack = door_fixtures.fake_slack
fake_feishu = door_fixtures.fake_feishu


def ops_config(db_url: str, **route: Any) -> dict[str, Any]:
    ops: dict[str, Any] = {
        "timeout": "30m",
        "slack": {"channel": APPROVALS, "approvers": {"users": [ALICE]}},
        "feishu": {"chat_id": FEISHU_APPROVALS, "approvers": {"users": [FEISHU_ALICE]}},
    }
    ops.update(route)
    return {
        "database_url": db_url,
        "agents": {"deploy": {"model": "scripted:deploy", "route": "ops",
                              "starters": {"slack": {"users": [STARTER]}}}},
        "routes": {"ops": ops},
    }


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "askhuman.yaml"
    path.write_text(yaml.safe_dump(ops_config(f"sqlite:///{tmp_path / 'askhuman.db'}")))
    return path


@pytest.fixture
async def ops(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], config: Path
) -> AsyncIterator[Door]:
    settings = Settings.model_validate(yaml.safe_load(config.read_text()))
    async with running_door(fake_slack, fake_feishu, settings) as system:
        yield system
