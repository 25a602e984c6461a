"""``/askhuman pending [page]`` over real HTTP: complete however many requests other
routes have open, paginated, and only what the person may answer."""

from __future__ import annotations

from pathlib import Path

from bot.settings import Settings
from tests.engine.pending_rows import add_open_requests
from tests.fakes.slack_api import FakeSlackAPI
from tests.slack.conftest import ALICE, APPROVALS, MALLORY, Slack, running_system


def two_routes(tmp_path: Path) -> Settings:
    return Settings.model_validate({
        "database_url": f"sqlite:///{tmp_path / 'askhuman.db'}",
        "agents": {"deploy": {"model": "scripted:deploy", "route": "ops"}},
        "routes": {
            "ops": {"timeout": "30m", "slack": {"channel": APPROVALS,
                                                 "approvers": {"users": [ALICE]}}},
            "other": {"timeout": "30m", "slack": {"channel": "C0OTHER",
                                                   "approvers": {"users": ["U0OTHER"]}}},
        },
    })


async def pending(slack: Slack, text: str, user: str) -> str:
    before = len(slack.fake.response_url_calls)
    assert (await slack.command(text, user=user)).status_code == 200
    await slack.wait_until(lambda: len(slack.fake.response_url_calls) > before,
                           what="the pending reply")
    reply = slack.fake.response_url_calls[-1]
    assert reply["response_type"] == "ephemeral"
    return str(reply["text"])


async def test_pending_lists_every_request_page_by_page(
    fake_slack: FakeSlackAPI, tmp_path: Path
) -> None:
    settings = two_routes(tmp_path)
    async with running_system(fake_slack, settings) as slack:
        add_open_requests(slack.database, "other", 205, question="Elsewhere")
        add_open_requests(slack.database, "ops", 22, question="Yours")

        first = await pending(slack, "pending", ALICE)
        assert first.startswith("*22 open request(s) you may answer:*")
        assert first.count("• ") == 20 and "Yours 0" in first and "Elsewhere" not in first
        assert "Showing 1–20 of 22 (page 1 of 2) — `/askhuman pending 2`" in first

        second = await pending(slack, "pending 2", ALICE)
        assert second.count("• ") == 2 and "Yours 21" in second
        assert "Showing 21–22 of 22 (page 2 of 2)" in second and "pending 3" not in second

        assert "Nothing is waiting" in await pending(slack, "pending", MALLORY)
        assert "Showing 1–20 of 22" in await pending(slack, "pending junk", ALICE)
