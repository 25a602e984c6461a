"""An escalation chain at percentages on two served Slack replicas sharing one database:
each step is posted once, the original card says "Escalated to …", and an approver of a
reached step decides for every copy."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

from bot.settings import Settings
from tests.engine.helpers import FakeClock
from tests.fakes.slack_api import FakeSlackAPI
from tests.slack.conftest import APPROVALS, STARTER, Slack, make_settings, running_system

ONCALL, MANAGERS = "C0ONCALL", "C0MANAGERS"
PAGER, BOSS = "U0PAGER", "U0BOSS"


def chain_settings(base: Settings) -> Settings:
    data: dict[str, Any] = base.model_dump(mode="json")
    ops = data["routes"]["ops"]
    ops["escalation"] = [{"after": "50%", "route": "oncall"},
                         {"after": "90%", "route": "managers"}]
    data["routes"]["oncall"] = {"slack": {"channel": ONCALL, "approvers": {"users": [PAGER]}}}
    data["routes"]["managers"] = {"slack": {"channel": MANAGERS,
                                            "approvers": {"users": [BOSS]}}}
    return Settings.model_validate(data)


def cards_in(slack: Slack, channel: str) -> list[str]:
    return [m.ts for m in list(slack.fake.messages.values())
            if m.channel == channel and m.blocks]


async def test_chain_on_two_replicas(fake_slack: FakeSlackAPI, settings: Settings) -> None:
    fake_slack.add_users([PAGER, BOSS])
    clock = FakeClock(dt.datetime.now(dt.UTC))
    chained = chain_settings(make_settings(settings.database_url))
    async with running_system(fake_slack, chained, clock=clock) as one, \
            running_system(fake_slack, chained, clock=clock) as two:
        await one.command("run deploy ship v7.0.0", user=STARTER)
        ts = await one.wait_for_card()

        async def sweep() -> int:
            counts = await asyncio.gather(*(s.engine.remind_and_escalate_due()
                                            for s in (one, two, one, two)))
            return sum(counts)

        clock.advance(14 * 60)  # 50% of 30m is 15m
        assert await sweep() == 0 and cards_in(one, ONCALL) == []
        clock.advance(60)
        assert await sweep() == 1
        await one.wait_until(lambda: cards_in(one, ONCALL), what="oncall card")
        await one.wait_until(lambda: "Escalated to oncall" in str(one.card_message(ts).blocks),
                             what="original card says escalated")
        clock.advance(12 * 60)  # 90% is 27m
        assert await sweep() == 1
        await one.wait_until(lambda: cards_in(one, MANAGERS), what="managers card")
        await one.wait_until(lambda: "Escalated to oncall, managers"
                             in str(one.card_message(ts).blocks), what="both steps shown")
        assert await sweep() == 0
        assert len(cards_in(one, ONCALL)) == 1 and len(cards_in(one, MANAGERS)) == 1
        assert len(cards_in(one, APPROVALS)) == 1

        oncall_ts = cards_in(one, ONCALL)[0]
        click = await two.interact(two.click_payload(oncall_ts, "Approve", PAGER,
                                                     environment="o1", channel=ONCALL))
        assert click.status_code == 200
        await one.wait_until(lambda: one.request_row().status == "submitted", what="decided")
        assert one.request_row().decided_by_user == PAGER
        for channel, message_ts in ((APPROVALS, ts), (ONCALL, oncall_ts),
                                    (MANAGERS, cards_in(one, MANAGERS)[0])):
            await one.wait_until(
                lambda c=channel, t=message_ts: not any(
                    b["type"] == "actions" for b in one.card_message(t, c).blocks),
                what=f"{channel} copy updated")
