"""Approve with edits through Slack: the modal, the run with the edited call, the
refusals inside the modal, and an edit on a quorum route (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.engine import audit_chain, receipts
from bot.engine.inbox import Click
from bot.engine.ports import Identity
from bot.settings import Settings
from storage import Vote
from tests.fakes.slack_api import FakeSlackAPI, validate_blocks
from tests.slack.conftest import (
    ALICE,
    BOB,
    CAROL,
    ORIGIN,
    TEAM_ID,
    Slack,
    make_settings,
    running_system,
)
from tests.tools import sample_tools
from tests.tools.harness import audit_rows, events, requests, runs, scripted_runtimes
from tests.tools.harness import with_ops_agent as with_agent
from tests.tools.mcp_server import STDIO_COMMAND, journal_lines
from tests.tools.scripts import Scripted

EDITABLE_SCALE = {"python": "tests.tools.sample_tools:scale_within", "name": "scale",
                  "fixed": {"cluster": "prod-eu"}, "approval": "always",
                  "editable": ["replicas"]}


@pytest.fixture(autouse=True)
def _fresh_calls() -> Iterator[None]:
    sample_tools.CALLS.clear()
    yield
    sample_tools.CALLS.clear()


MCP_SCALE = {"mcp": {"command": STDIO_COMMAND, "env": ["OPS_JOURNAL"]}, "include": ["scale"],
             "approval": "always", "editable": {"scale": ["replicas"]}}


async def _system(fake: FakeSlackAPI, settings: Settings, script: Scripted,
                  tool: dict[str, Any] = EDITABLE_SCALE) -> AsyncIterator[Slack]:
    configured = with_agent(settings, [tool], route="ops")
    async with running_system(fake, configured, scripted_runtimes(configured, script)) as s:
        yield s
        await s.engine.close_runtimes()


@pytest.fixture
def script() -> Scripted:
    return Scripted([("scale", {"service": "api", "replicas": 10})])


@pytest.fixture
async def ops(fake_slack: FakeSlackAPI, settings: Settings, script: Scripted
              ) -> AsyncIterator[Slack]:
    async for system in _system(fake_slack, settings, script):
        yield system


@pytest.fixture
async def quorum(fake_slack: FakeSlackAPI, db_url: str, script: Scripted
                 ) -> AsyncIterator[Slack]:
    settings = make_settings(db_url)
    raw = settings.model_dump(mode="json", exclude={"source"})
    raw["routes"]["ops"]["quorum"] = 2
    async for system in _system(fake_slack, Settings.model_validate(raw), script):
        yield system


def _thread(slack: Slack) -> list[str]:
    root = next(m.ts for m in slack.fake.messages.values()
                if m.channel == ORIGIN and m.thread_ts is None)
    return [m.text for m in slack.fake.thread_replies(ORIGIN, root)]


async def _open_modal(slack: Slack, ts: str, user: str = ALICE) -> dict[str, Any]:
    button = slack.buttons(ts)["Edit and approve"]
    assert button["action_id"].startswith("ahe:")
    payload = slack.click_payload(ts, "Edit and approve", user)
    before = len(slack.fake.views)
    assert (await slack.interact(payload)).status_code == 200
    await slack.wait_until(lambda: len(slack.fake.views) > before, what="views.open")
    return slack.fake.views[-1]


def _submission(view: dict[str, Any], user: str, replicas: str | None,
                reason: str = "") -> dict[str, Any]:
    values: dict[str, Any] = {}
    for block in view["blocks"]:
        if block["type"] != "input":
            continue
        element = block["element"]
        if element["type"] == "number_input":
            values[block["block_id"]] = {"in": {"type": "number_input", "value": replicas}}
        elif element["type"] == "plain_text_input":
            values[block["block_id"]] = {"in": {"type": "plain_text_input", "value": reason}}
    return {"type": "view_submission", "team": {"id": TEAM_ID},
            "user": {"id": user, "username": user.lower(), "name": user.lower()},
            "api_app_id": "A0APP", "trigger_id": "9.9.9",
            "view": {**view, "id": "V1", "team_id": TEAM_ID, "hash": "1.x",
                     "state": {"values": values}},
            "response_urls": []}


async def _finished(slack: Slack) -> str:
    await slack.wait_until(lambda: any(r.status in ("succeeded", "failed")
                                       for r in runs(slack.database)), what="run finished")
    await slack.wait_until(lambda: any("scale " in t for t in _thread(slack)),
                           what="final answer")
    return next(t for t in _thread(slack) if t.startswith("scale "))


def _chain_ok(slack: Slack) -> None:
    with slack.database.transaction() as session:
        verdict = audit_chain.verify(session)
    assert verdict.ok, verdict


async def test_edit_in_the_modal_runs_the_edited_call_once_and_tells_the_model(
    ops: Slack
) -> None:
    await ops.command("run ops scale api")
    ts = await ops.wait_for_card()
    assert list(ops.buttons(ts)) == ["Approve", "Edit and approve", "Reject"]
    view = await _open_modal(ops, ts)
    assert validate_blocks(view["blocks"]) is None
    number = next(b for b in view["blocks"] if b["type"] == "input"
                  and b["element"]["type"] == "number_input")
    assert number["label"]["text"] == "replicas"
    assert number["element"]["initial_value"] == "10"
    original = requests(ops.database)[0].binding

    response = await ops.interact(_submission(view, ALICE, "5", "10 is too many"))
    assert response.status_code == 200 and not response.content  # the modal closes
    final = await _finished(ops)
    assert sample_tools.CALLS == [("scale", {"service": "api", "replicas": 5,
                                             "cluster": "prod-eu"})]
    assert "scaled api to 5 on prod-eu" in final
    assert "a reviewer edited the arguments before approving" in final
    assert "replicas 10 → 5" in final

    row = requests(ops.database)[0]
    assert row.binding == original  # the runtime checked the model's call against it
    assert row.tool["edit"]["before"] == {"replicas": 10}
    assert row.tool["edit"]["after"] == {"replicas": 5}
    assert row.tool["binding"] != original
    await ops.wait_until(lambda: "replicas: 10 → 5, edited by" in json.dumps(
        ops.card_message(ts).blocks, ensure_ascii=False), what="the diff on the card")
    edited = next(d for e, _o, d, _r in audit_rows(ops.database) if e == "tool_call_edited")
    assert edited["args_before"] == {"service": "api", "replicas": 10}
    assert edited["args_after"] == {"service": "api", "replicas": 5}
    assert edited["binding_before"] == original
    started = next(d for e, _o, d, _r in audit_rows(ops.database) if e == "tool_started")
    assert started["binding"] == edited["binding_after"][:12] != original[:12]
    _chain_ok(ops)
    with ops.database.transaction() as session:  # the receipt states both calls
        decided = requests(ops.database)[0]
        signed = receipts.for_request(decided, session.query(Vote).all(), b"k")
    assert signed is not None
    stated = receipts.verify(signed, b"k")
    assert stated.args_hash == original[:32]
    assert stated.edited_args_hash == edited["binding_after"][:32]
    assert stated.deciders == [f"slack:{ALICE}"]


@pytest.mark.parametrize(("typed", "words"), [("50", "at most 20"), ("0", "at least 1"),
                                               ("many", "must be a number")])
async def test_an_invalid_edit_is_refused_in_the_modal_and_nothing_is_recorded(
    ops: Slack, typed: str, words: str
) -> None:
    await ops.command("run ops scale api")
    ts = await ops.wait_for_card()
    view = await _open_modal(ops, ts)
    response = await ops.interact(_submission(view, ALICE, typed))
    body = response.json()
    assert body["response_action"] == "errors"
    [(block, text)] = body["errors"].items()
    assert block == "edit_0" and "replicas" in text and words in text
    row = requests(ops.database)[0]
    assert row.status == "pending" and "edit" not in row.tool
    with ops.database.transaction() as session:
        assert session.query(Vote).count() == 0
    assert "tool_call_edited" not in events(ops.database)
    assert sample_tools.CALLS == []


async def test_an_edit_on_a_quorum_route_resets_the_votes(quorum: Slack) -> None:
    await quorum.command("run ops scale api")
    ts = await quorum.wait_for_card()
    assert (await quorum.interact(quorum.click_payload(ts, "Approve", CAROL))).status_code == 200
    await quorum.wait_until(lambda: "vote_recorded" in events(quorum.database), what="vote")

    view = await _open_modal(quorum, ts, BOB)
    assert (await quorum.interact(_submission(view, BOB, "4"))).status_code == 200
    await quorum.wait_until(lambda: "votes_cleared" in events(quorum.database), what="reset")
    with quorum.database.transaction() as session:
        assert [v.user_id for v in session.query(Vote)] == [BOB]  # the editor's approval
    assert requests(quorum.database)[0].status == "pending"
    cleared = next(d for e, _o, d, _r in audit_rows(quorum.database) if e == "votes_cleared")
    assert [v["action_id"] for v in cleared["votes"]] == ["approve"]
    await quorum.wait_until(lambda: "replicas: 10 → 4" in json.dumps(
        quorum.card_message(ts).blocks, ensure_ascii=False),
        what="every copy shows the edited call")

    # Carol approves again, this time the edited call: the quorum is met
    assert (await quorum.interact(quorum.click_payload(ts, "Approve", CAROL))).status_code == 200
    await _finished(quorum)
    assert sample_tools.CALLS == [("scale", {"service": "api", "replicas": 4,
                                             "cluster": "prod-eu"})]
    _chain_ok(quorum)


async def test_a_veto_after_an_edit_ends_it(quorum: Slack) -> None:
    await quorum.command("run ops scale api")
    ts = await quorum.wait_for_card()
    view = await _open_modal(quorum, ts, BOB)
    assert (await quorum.interact(_submission(view, BOB, "4"))).status_code == 200
    await quorum.wait_until(lambda: "tool_call_edited" in events(quorum.database), what="edit")
    assert (await quorum.interact(quorum.click_payload(ts, "Reject", CAROL))).status_code == 200
    await quorum.wait_until(lambda: any(r.status in ("succeeded", "failed")
                                        for r in runs(quorum.database)), what="run finished")
    row = requests(quorum.database)[0]
    assert row.status == "submitted" and row.result["action"]["id"] == "reject"
    assert sample_tools.CALLS == []
    _chain_ok(quorum)


async def test_an_approval_clicked_before_an_edit_does_not_count_for_the_edited_call(
    quorum: Slack
) -> None:
    await quorum.command("run ops scale api")
    ts = await quorum.wait_for_card()
    ref = requests(quorum.database)[0].ref
    carol = Identity("slack", CAROL, "carol")
    stale = await quorum.engine.record_click(Click("slack", ref, carol, "approve", {}))
    assert stale is not None  # stored before the edit, decided after it
    view = await _open_modal(quorum, ts, BOB)
    assert (await quorum.interact(_submission(view, BOB, "4"))).status_code == 200
    await quorum.wait_until(lambda: "tool_call_edited" in events(quorum.database), what="edit")
    result = await quorum.engine.decide_click(stale)
    assert result.outcome == "rejected" and "edited after you clicked" in str(result.words)
    with quorum.database.transaction() as session:
        assert [v.user_id for v in session.query(Vote)] == [BOB]
    assert requests(quorum.database)[0].status == "pending"


async def test_an_mcp_tool_runs_with_the_edited_arguments(
    fake_slack: FakeSlackAPI, settings: Settings, script: Scripted, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPS_JOURNAL", str(tmp_path / "journal.txt"))
    async for slack in _system(fake_slack, settings, script, MCP_SCALE):
        await slack.command("run ops scale api")
        ts = await slack.wait_for_card()
        view = await _open_modal(slack, ts)
        assert (await slack.interact(_submission(view, ALICE, "3"))).status_code == 200
        final = await _finished(slack)
        assert "api now runs 3 replica(s)" in final and "replicas 10 → 3" in final
        lines = journal_lines(tmp_path / "journal.txt")
        assert [line.split(" pid=")[0] for line in lines] == ["scale api 3"]


async def test_someone_who_may_not_answer_is_told_before_the_edit_form_opens(
    ops: Slack,
) -> None:
    """The edit form is an answer in the making: a person who may not answer is told
    why where they clicked (and it is audited), instead of filling in a form that
    would then be refused."""
    from tests.slack.conftest import MALLORY

    await ops.command("run ops scale api")
    ts = await ops.wait_for_card()
    before = len(ops.fake.views)
    payload = ops.click_payload(ts, "Edit and approve", MALLORY)
    assert (await ops.interact(payload)).status_code == 200
    await ops.wait_until(lambda: ops.ephemerals_to(MALLORY), what="ephemeral")
    assert "not allowed" in ops.ephemerals_to(MALLORY)[0]
    assert len(ops.fake.views) == before  # no form opened
    assert ("edit_open_unauthorized", "refused", MALLORY) in ops.audit()
    assert requests(ops.database)[0].status == "pending"
    view = await _open_modal(ops, ts, ALICE)  # an approver still gets the form
    assert view["type"] == "modal"
