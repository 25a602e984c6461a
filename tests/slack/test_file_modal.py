"""File fields: the button opens a modal; submissions stage files; errors show inline."""

from __future__ import annotations

import time
from typing import Any

import pytest
from pydantic import JsonValue

from bot.agents.base import Outcome
from bot.askhuman.config import AskHumanConfig
from bot.askhuman.schema import AskHumanToolResult, DeferredToolCallPayload
from tests.fakes.slack_api import FakeSlackAPI
from tests.slack.conftest import ALICE, MALLORY, TEAM_ID, Slack, make_settings, running_system

ASK = {
    "question": "Upload the signed contract, then approve.",
    "fields": [{"type": "file", "name": "contract", "label": "Contract", "required": True}],
    "actions": [{"id": "approve", "label": "Approve", "style": "primary"}],
}


class UploadAgent:
    """A runtime that asks for one file and then reports what it got."""

    name = "upload"

    async def run(self, prompt: str) -> Outcome:
        call = DeferredToolCallPayload(
            tool_call_id="c1", tool_name="ask_human", args=ASK,
            metadata={"layer_type": "dify.ask_human", "tool_name": "ask_human",
                      "schema_version": 1},
        )
        return Outcome.asking(call, {"prompt": prompt})

    async def resume(
        self, snapshot: dict[str, JsonValue], results: dict[str, AskHumanToolResult]
    ) -> Outcome:
        files = results["c1"].values.get("contract") or []
        names = [f["name"] for f in files if isinstance(f, dict)]  # type: ignore[index]
        return Outcome.finished(f"got {names}", snapshot)


@pytest.fixture
async def upload(fake_slack: FakeSlackAPI, tmp_path: Any) -> Any:
    settings = make_settings(f"sqlite:///{tmp_path / 'files.db'}")
    # File fields need the admin's double switch, as in Dify.
    files_ok = AskHumanConfig(allow_file_fields=True, allowed_field_types=["file"])
    deploy = settings.agents["deploy"].model_copy(update={"ask_human": files_ok})
    settings = settings.model_copy(update={"agents": {"deploy": deploy}})
    async with running_system(fake_slack, settings, lambda name: UploadAgent()) as system:  # type: ignore[arg-type,return-value]
        yield system


def _file_button(slack: Slack, ts: str) -> dict[str, Any]:
    for block in slack.card_message(ts).blocks:
        accessory = block.get("accessory") or {}
        if accessory.get("type") == "button":
            return dict(accessory)
    raise AssertionError("no file button")


def _view_submission(view: dict[str, Any], user: str, files: list[dict[str, Any]]) -> dict:
    block = next(b for b in view["blocks"] if b["type"] == "input")
    return {
        "type": "view_submission",
        "team": {"id": TEAM_ID},
        "user": {"id": user, "username": user.lower(), "name": user.lower()},
        "api_app_id": "A0APP",
        "trigger_id": "9.9.9",
        "view": {
            **view, "id": "V1", "team_id": TEAM_ID, "hash": "1.x",
            "state": {"values": {block["block_id"]: {
                block["element"]["action_id"]: {"type": "file_input", "files": files}}}},
        },
        "response_urls": [],
    }


FILE = {"id": "F0001", "name": "contract.pdf", "title": "contract.pdf",
        "mimetype": "application/pdf", "size": 1234,
        "url_private_download": "https://files.slack.test/F0001/download"}


async def test_file_field_modal_flow(upload: Slack) -> None:
    slack = upload
    await slack.command("run deploy please sign")
    ts = await slack.wait_for_card()
    button = _file_button(slack, ts)
    payload = slack.click_payload(ts, "Approve", ALICE, action_id=button["action_id"])
    payload["actions"][0]["value"] = button["value"]
    t0 = time.perf_counter()
    assert (await slack.interact(payload)).status_code == 200
    await slack.wait_until(lambda: slack.fake.views, what="views.open")
    assert time.perf_counter() - t0 < 3
    view = slack.fake.views[0]
    assert any(b["element"]["type"] == "file_input" for b in view["blocks"] if b["type"] == "input")

    # a stranger's upload is refused inline, nothing staged
    response = await slack.interact(_view_submission(view, MALLORY, [FILE]))
    body = response.json()
    assert body["response_action"] == "errors"
    assert "not allowed" in next(iter(body["errors"].values()))

    # Alice's upload is staged, the modal closes (empty ack)
    response = await slack.interact(_view_submission(view, ALICE, [FILE]))
    assert response.status_code == 200 and not response.content
    await slack.wait_until(lambda: slack.ephemerals_to(ALICE), what="attached notice")
    assert "Attached 1 file" in slack.ephemerals_to(ALICE)[0]

    # Approve carries the staged file to the agent
    await slack.interact(slack.click_payload(ts, "Approve", ALICE))
    await slack.wait_until(
        lambda: any("got ['contract.pdf']" in m.text for m in slack.fake.messages.values()),
        what="final answer",
    )
    assert slack.request_row().status == "submitted"


async def test_approve_without_required_file_is_refused(upload: Slack) -> None:
    slack = upload
    await slack.command("run deploy please sign")
    ts = await slack.wait_for_card()
    await slack.interact(slack.click_payload(ts, "Approve", ALICE))
    await slack.wait_until(lambda: slack.ephemerals_to(ALICE), what="refusal")
    assert "Contract" in slack.ephemerals_to(ALICE)[0]
    assert slack.request_row().status == "pending"


async def test_slack_connect_guest_upload_is_refused_inline(upload: Slack) -> None:
    slack = upload
    guest = "U0GUEST"
    slack.fake.add_users([guest], team="T0PARTNER")
    slack.fake.channel_members["C0APPROVALS"] = [guest, "UBOT"]  # a shared channel
    await slack.command("run deploy please sign")
    ts = await slack.wait_for_card()
    button = _file_button(slack, ts)
    payload = slack.click_payload(ts, "Approve", ALICE, action_id=button["action_id"])
    payload["actions"][0]["value"] = button["value"]
    await slack.interact(payload)
    await slack.wait_until(lambda: slack.fake.views, what="views.open")
    submission = _view_submission(slack.fake.views[0], guest, [FILE])
    submission["user"]["team_id"] = "T0PARTNER"
    body = (await slack.interact(submission)).json()
    assert body["response_action"] == "errors"
    assert "another organisation" in next(iter(body["errors"].values()))
    assert slack.request_row().status == "pending"


async def test_an_upload_the_database_cannot_store_in_time_stays_open_with_an_error(
    upload: Slack,
) -> None:
    import asyncio
    import sqlite3
    import threading
    from pathlib import Path

    from bot.platforms.slack.listeners.views import UNAVAILABLE

    slack = upload
    await slack.command("run deploy please sign")
    ts = await slack.wait_for_card()
    button = _file_button(slack, ts)
    payload = slack.click_payload(ts, "Approve", ALICE, action_id=button["action_id"])
    payload["actions"][0]["value"] = button["value"]
    await slack.interact(payload)
    await slack.wait_until(lambda: slack.fake.views, what="views.open")
    held, done = threading.Event(), threading.Event()

    def hold() -> None:  # another process holds the write lock for 4 s
        connection = sqlite3.connect(Path(slack.database.url.removeprefix("sqlite:///")),
                                     timeout=30, isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")
        held.set()
        done.wait(4)
        connection.execute("COMMIT")
        connection.close()

    locker = threading.Thread(target=hold)
    locker.start()
    held.wait(5)
    t0 = time.perf_counter()
    response = await slack.interact(_view_submission(slack.fake.views[0], ALICE, [FILE]))
    assert time.perf_counter() - t0 < 3
    body = response.json()
    assert body["response_action"] == "errors"
    assert list(body["errors"].values()) == [UNAVAILABLE]
    done.set()
    await asyncio.to_thread(locker.join)
    # Nothing was staged: approving now is refused for the missing file.
    await slack.interact(slack.click_payload(ts, "Approve", ALICE))
    await slack.wait_until(lambda: slack.ephemerals_to(ALICE), what="refusal")
    assert "Contract" in slack.ephemerals_to(ALICE)[-1]
    assert slack.request_row().status == "pending"
