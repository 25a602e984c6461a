"""Two replicas of the Slack app on one database: an Events API retry that reaches the
other replica is not processed again (shared ``seen_events``), and is audited."""

from __future__ import annotations

import asyncio

from sqlalchemy import func, select

from bot.settings import Settings
from storage import AuditLog, Run
from tests.fakes.slack_api import FakeSlackAPI
from tests.slack.conftest import ORIGIN, STARTER, Slack, running_system


def _runs(slack: Slack) -> int:
    with slack.database.transaction() as session:
        return int(session.scalar(select(func.count()).select_from(Run)) or 0)


def _refusals(slack: Slack) -> list[tuple[str | None, dict[str, object]]]:
    with slack.database.transaction() as session:
        rows = session.scalars(select(AuditLog).where(AuditLog.event == "adapter_refused")
                               .order_by(AuditLog.id))
        # Repeats of one refusal share a counted row: list each occurrence.
        return [(r.actor_user, dict(r.details)) for r in rows for _ in range(r.occurrences)]


async def test_event_retry_on_another_replica_starts_one_run(
    fake_slack: FakeSlackAPI, settings: Settings
) -> None:
    event = {
        "type": "app_mention",
        "user": STARTER,
        "text": "<@UBOT> deploy: ship v6.0.0",
        "ts": "1700000000.000300",
        "channel": ORIGIN,
        "event_ts": "1700000000.000300",
    }
    async with running_system(fake_slack, settings) as one, \
            running_system(fake_slack, settings) as two:
        assert one.engine is not two.engine
        first = await one.event(event, "EvREPLICA1")
        retry = await two.event(event, "EvREPLICA1", retry=1)  # the retry lands elsewhere
        assert first.status_code == 200 and retry.status_code == 200
        assert retry.headers.get("X-Slack-No-Retries") == "1"
        await one.wait_for_card()
        await asyncio.sleep(0.3)
        assert _runs(one) == 1
        assert _refusals(one) == [(STARTER, {"platform": "slack", "check": "duplicate_event",
                                           "event_id": "EvREPLICA1",
                                           "event_type": "app_mention"})]
        # A retry to the same replica is still caught by its in-memory filter.
        await one.event(event, "EvREPLICA1", retry=2)
        assert _runs(one) == 1 and len(_refusals(one)) == 2
