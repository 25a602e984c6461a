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


async def test_refusals_pending_and_help_speak_the_persons_language(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str], tmp_path: Path
) -> None:
    """Slack: the clicker's ``locale`` (users.info include_locale) picks the language of
    what only they see; Feishu: toasts carry both languages (Feishu shows the person's)
    and replies follow the route's locale. Model text is never translated."""

    from tests.api.conftest import FEISHU_ALICE
    from tests.slack.conftest import ALICE, MALLORY

    values = ops_config(f"sqlite:///{tmp_path / 'askhuman.db'}", locale="zh-CN",
                        timezone="Asia/Shanghai")
    fake_slack.users[MALLORY]["locale"] = "zh-CN"
    fake_slack.users[ALICE]["locale"] = "zh-CN"
    fake_slack.users[ALICE]["tz"] = "Asia/Shanghai"
    async with running_door(fake_slack, fake_feishu, Settings.model_validate(values)) as ops:
        ref, ts = await start(ops)

        # A refused click: told in the clicker's Slack language.
        await ops.slack.interact(ops.slack.click_payload(ts, "Approve", MALLORY))
        await ops.slack.wait_until(lambda: ops.slack.ephemerals_to(MALLORY), what="refusal")
        assert ops.slack.ephemerals_to(MALLORY) == ["你无权回复此请求。"]

        # /askhuman pending and help in Alice's language, dates in her time zone.
        before = len(fake_slack.response_url_calls)
        await ops.slack.command("pending", user=ALICE)
        await ops.slack.wait_until(lambda: len(fake_slack.response_url_calls) > before,
                                   what="the pending list")
        listed = fake_slack.response_url_calls[before]["text"]
        assert "你可以处理的请求共 1 个" in listed and "截止" in listed and "UTC+8" in listed
        assert "Deploy v1.0.0?" in listed  # the model's words, as written
        before = len(fake_slack.response_url_calls)
        await ops.slack.command("help", user=ALICE)
        await ops.slack.wait_until(lambda: len(fake_slack.response_url_calls) > before,
                                   what="help")
        assert "让 AI 智能体请人审批" in fake_slack.response_url_calls[before]["text"]

        # Feishu: a refused click's toast offers Chinese next to English.
        card = await ops.feishu_card()
        response = await ops.click_feishu(card, ref, operator="ou_stranger")
        refused = response.json()["toast"]
        assert refused["content"] == refused["i18n"]["zh_cn"]  # the route's language first
        assert refused["i18n"]["en_us"] and refused["i18n"]["en_us"] != refused["i18n"]["zh_cn"]
        told = await ops.feishu_refusal(response, "ou_stranger")
        assert "你无权回复此请求。" in told, told  # the card's route speaks Chinese

        # An allowed click: its toast offers Chinese too, and the card shows the outcome.
        ok = ops.feishu_taken(await ops.click_feishu(card, ref, operator=FEISHU_ALICE))
        assert ok["content"] == ok["i18n"]["zh_cn"] and "已" in ok["i18n"]["zh_cn"]


def test_pending_lists_follow_the_locale() -> None:
    import dataclasses

    from bot.engine.results import PendingPage
    from bot.platforms.feishu.pending import pending_reply
    from bot.platforms.slack.listeners.commands import help_text, pending_text
    from tests.renderers.cases import make_card

    card = dataclasses.replace(make_card("deploy"), locale="zh-CN", timezone="Asia/Shanghai")
    page = PendingPage([card], 12, 1, 10)
    feishu = pending_reply(page)
    assert "你可以处理的请求共 12 个" in feishu and "/pending 2" in feishu and "UTC+8" in feishu
    assert card.args.title in feishu
    english = pending_reply(PendingPage([make_card("deploy")], 1, 1, 10))
    assert english.startswith("1 open request(s) you may answer:")
    assert "open request(s)" in pending_text(page) and "共 12 个" in pending_text(page, "zh-CN")
    assert "Agents you may start" in help_text(["deploy"])
    assert "你可以发起的智能体" in help_text(["deploy"], "zh_CN")


def test_feishu_help_follows_the_routes_locale() -> None:
    from bot.platforms.feishu.handlers import help_text

    chinese = help_text(["deploy"], "zh-CN")
    assert chinese.startswith("要发起运行") and chinese.endswith("你可以发起的智能体：deploy。")
    assert "还不能发起任何智能体" in help_text([], "zh-CN")
    assert help_text(["deploy"]).endswith("Agents you may start: deploy.")
