"""A ``locale: zh-CN`` route on the served app: Slack and Feishu cards in Chinese."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.settings import ConfigError, Settings, load_settings
from tests.api.conftest import running_door
from tests.fakes.feishu_api import FakeFeishuApi
from tests.fakes.slack_api import FakeSlackAPI
from tests.ops.conftest import ops_config
from tests.ops.test_admin_cli import start


async def test_zh_cn_route_cards_on_slack_and_feishu(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], tmp_path: Path
) -> None:
    values = ops_config(f"sqlite:///{tmp_path / 'askhuman.db'}", locale="zh-CN",
                        timezone="Asia/Shanghai")
    async with running_door(fake_slack, fake_feishu, Settings.model_validate(values)) as ops:
        _, ts = await start(ops)
        blocks = str(ops.slack.card_message(ts).blocks)
        assert "截止" in blocks and "来自" in blocks and "UTC+8" in blocks
        assert "v1.0.0" in blocks  # the model's text stays as written
        card = await ops.feishu_card()
        assert "来自" in card.sent_content and "截止" in card.sent_content


def test_bad_locale_or_timezone_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "askhuman.yaml"
    for key, value in (("timezone", "Mars/Olympus"), ("locale", "xx")):
        path.write_text(yaml.safe_dump(ops_config("sqlite:///x.db", **{key: value})))
        with pytest.raises(ConfigError) as caught:
            load_settings(path)
        assert f"routes.ops.{key}" in str(caught.value), str(caught.value)
