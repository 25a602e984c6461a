"""Routing rules apply to API requests: ``agent`` is ``client/agent`` (authenticated),
``args`` the request's arguments; the card goes to the rule's route."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.settings import Settings
from tests.api.conftest import DEPLOY_ARGS, FIN, add_client, make_settings, running_door
from tests.fakes.feishu_api import FakeFeishuApi
from tests.fakes.slack_api import FakeSlackAPI


def with_rules(base: Settings) -> Settings:
    data: dict[str, Any] = base.model_dump(mode="json")
    data["rules"] = [{"when": "agent == 'ci-bot/deploy' && "
                              "args.fields.exists(f, f.name == 'environment')",
                      "route": "fin", "quorum": 2}]
    return Settings.model_validate(data)


async def test_a_rule_reroutes_an_api_request(
    tmp_path: Path, fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str],
) -> None:
    settings = with_rules(make_settings(f"sqlite:///{tmp_path / 'askhuman.db'}"))
    async with running_door(fake_slack, fake_feishu, settings) as door:
        ci = add_client(door.database, "ci-bot", ["ops", "fin"], ["deploy"])
        created = await door.create(ci, {"route": "ops", "args": DEPLOY_ARGS,
                                         "agent_name": "deploy"})
        assert created.status_code == 201, created.text
        ts = await door.slack.wait_for_card(channel=FIN)
        assert ts
        row = door.slack.request_row()
        assert (row.route, row.quorum) == ("fin", 2)
        assert created.json()["route"] == "fin"
