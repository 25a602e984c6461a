"""Tool calls behind approval, end to end through Slack (loopback fake, signed clicks).

The scripted ``ops`` agent calls a real Python tool (``tests.tools.sample_tools:scale``,
``fixed`` cluster, approval when replicas > 3) or an MCP tool of the example server.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from bot.settings import Settings
from storage import HumanRequest, Run
from tests.fakes.slack_api import FakeSlackAPI, validate_blocks
from tests.slack.conftest import ALICE, APPROVALS, BOB, ORIGIN, Slack, running_system
from tests.tools import sample_tools
from tests.tools.harness import (
    SCALE_TOOL,
    audit_rows,
    events,
    requests,
    runs,
    scripted_runtimes,
    with_ops_agent,
)
from tests.tools.mcp_server import STDIO_COMMAND, journal_lines
from tests.tools.scripts import Scripted


@pytest.fixture(autouse=True)
def _fresh_calls() -> Iterator[None]:
    sample_tools.CALLS.clear()
    yield
    sample_tools.CALLS.clear()


@pytest.fixture
def script() -> Scripted:
    return Scripted()


@pytest.fixture
def tools() -> list[dict[str, Any]]:
    return [SCALE_TOOL]


@pytest.fixture
async def ops(fake_slack: FakeSlackAPI, settings: Settings, script: Scripted,
              tools: list[dict[str, Any]]) -> AsyncIterator[Slack]:
    configured = with_ops_agent(settings, tools, route="ops")
    async with running_system(fake_slack, configured,
                              scripted_runtimes(configured, script)) as system:
        yield system
        await system.engine.close_runtimes()


def cards(slack: Slack) -> list[str]:
    """ts of every card in the approvals channel, oldest first."""
    return sorted(m.ts for m in slack.fake.messages.values()
                  if m.channel == APPROVALS and m.blocks)


def root_ts(slack: Slack) -> str:
    return next(m.ts for m in slack.fake.messages.values()
                if m.channel == ORIGIN and m.thread_ts is None)


def thread(slack: Slack) -> list[str]:
    return [m.text for m in slack.fake.thread_replies(ORIGIN, root_ts(slack))]


def click(slack: Slack, ts: str, label: str, reason: str | None = None,
          user: str = ALICE) -> dict[str, Any]:
    payload = slack.click_payload(ts, label, user)
    for block_id, state in payload["state"]["values"].items():
        if block_id.endswith(":reason"):
            state["in"]["value"] = reason
    return payload


async def start(slack: Slack, text: str = "run ops scale api") -> None:
    assert (await slack.command(text)).status_code == 200


async def finished(slack: Slack) -> str:
    await slack.wait_until(lambda: any(r.status in ("succeeded", "failed")
                                       for r in runs(slack.database)), what="run finished")
    await slack.wait_until(lambda: any("success" in t or "denied" in t or "failed" in t
                                       for t in thread(slack)), what="final answer")
    return thread(slack)[-1]


async def test_approve_runs_the_call_once_and_says_so_in_the_thread(
    ops: Slack, script: Scripted
) -> None:
    script.steps = ([("scale", {"service": "api", "replicas": "5"})],)
    await start(ops)
    ts = await ops.wait_for_card()
    card = ops.card_message(ts)
    assert validate_blocks(card.blocks) is None
    text = json.dumps(card.blocks)
    assert "Approve tool call: scale" in text and "*replicas*: 5" in text
    assert "*cluster*: prod-eu _(fixed by admin)_" in text
    row = requests(ops.database)[0]
    assert row.kind == "tool_approval" and row.binding and row.binding[:12] in text
    assert sample_tools.CALLS == []

    assert (await ops.interact(click(ops, ts, "Approve"))).status_code == 200
    final = await finished(ops)
    assert final == "scale success: scaled api to 5 on prod-eu"
    assert sample_tools.CALLS == [("scale", {"service": "api", "replicas": 5,
                                             "cluster": "prod-eu"})]
    assert "Ran scale(service=api, replicas=5): ok" in thread(ops)
    trail = events(ops.database)
    for event in ("tool_approval_requested", "decided", "tool_started", "tool_finished",
                  "resumed", "run_succeeded"):
        assert event in trail, trail
    assert trail.index("decided") < trail.index("tool_started") < trail.index("tool_finished")
    started = next(d for e, _o, d, _r in audit_rows(ops.database) if e == "tool_started")
    assert started["binding"] == row.binding[:12] and started["tool"] == "scale"
    await ops.wait_until(lambda: not any(b["type"] == "actions"
                                         for b in ops.card_message(ts).blocks), what="update")


MCP_SCALE = {"mcp": {"command": STDIO_COMMAND, "env": ["OPS_JOURNAL"]}, "include": ["scale"],
             "approval": "always"}
BOTH = pytest.mark.parametrize("tools", [[SCALE_TOOL], [MCP_SCALE]], ids=["python", "mcp"])


@pytest.fixture(autouse=True)
def _mcp_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    journal = tmp_path / "mcp-journal.txt"
    monkeypatch.setenv("OPS_JOURNAL", str(journal))
    return journal


@BOTH
async def test_reject_with_a_reason_reaches_the_model_and_nothing_runs(
    ops: Slack, script: Scripted, _mcp_journal: Path
) -> None:
    script.steps = ([("scale", {"service": "api", "replicas": 9})],)
    await start(ops)
    ts = await ops.wait_for_card()
    await ops.interact(click(ops, ts, "Reject", reason="traffic peak until 18:00"))
    final = await finished(ops)
    assert final == ("scale denied: The reviewer rejected this call: traffic peak until 18:00 "
                     "The action was not run.")
    assert sample_tools.CALLS == [] and journal_lines(_mcp_journal) == []
    assert "tool_started" not in events(ops.database)
    assert not any(t.startswith("Ran ") for t in thread(ops))
    result = requests(ops.database)[0].result
    assert result is not None and result["action"]["id"] == "reject"  # an AskHumanToolResult
    assert result["values"] == {"reason": "traffic peak until 18:00"}


@BOTH
async def test_timeout_never_runs_the_tool(ops: Slack, script: Scripted,
                                           _mcp_journal: Path) -> None:
    script.steps = ([("scale", {"service": "api", "replicas": 9})],)
    await start(ops)
    await ops.wait_for_card()
    with ops.database.transaction() as session:
        row = session.query(HumanRequest).one()
        session.execute(update(HumanRequest).values(
            created_at=row.created_at - dt.timedelta(minutes=30),
            deadline=dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(seconds=1)))
    assert await ops.engine.expire_due() == 1
    final = await finished(ops)
    assert final == "scale denied: No approval within 30m; the action was not run."
    assert sample_tools.CALLS == [] and journal_lines(_mcp_journal) == []
    assert requests(ops.database)[0].status == "timeout"


async def test_below_the_threshold_runs_without_a_card(ops: Slack, script: Scripted) -> None:
    script.steps = ([("scale", {"service": "api", "replicas": 2})],)
    await start(ops)
    final = await finished(ops)
    assert final == "scale success: scaled api to 2 on prod-eu"
    assert cards(ops) == [] and requests(ops.database) == []
    assert "Ran scale(service=api, replicas=2): ok" in thread(ops)


async def test_two_parallel_approvals_resume_once_after_both(
    ops: Slack, script: Scripted
) -> None:
    script.steps = ([("scale", {"service": "api", "replicas": 4}),
                     ("scale", {"service": "web", "replicas": 7})],)
    await start(ops)
    await ops.wait_until(lambda: len(cards(ops)) == 2, what="two cards")
    first, second = cards(ops)
    await ops.interact(click(ops, first, "Approve"))
    await ops.wait_until(lambda: requests(ops.database)[0].status != "pending"
                         or requests(ops.database)[1].status != "pending", what="one decided")
    await ops.engine.run_worker_once()
    assert sample_tools.CALLS == [] and "resumed" not in events(ops.database)
    assert await ops.engine.job_states() == {}
    await ops.interact(click(ops, second, "Approve", user=BOB))
    final_text = await finished(ops)
    assert sorted(c[1]["service"] for c in sample_tools.CALLS) == ["api", "web"]
    assert events(ops.database).count("resumed") == 1
    assert await ops.engine.job_states() == {"done": 1}
    assert "scaled api to 4" in "\n".join(thread(ops)) and "scaled web to 7" in final_text


async def test_arguments_tampered_between_ask_and_resume_run_nothing(
    ops: Slack, script: Scripted
) -> None:
    script.steps = ([("scale", {"service": "api", "replicas": 4})],)
    await start(ops)
    ts = await ops.wait_for_card()
    with ops.database.transaction() as session:
        run = session.query(Run).one()
        snapshot = json.loads(json.dumps(run.snapshot))
        snapshot["messages"][-1]["parts"][0]["args"] = {"service": "api", "replicas": 400}
        session.execute(update(Run).values(snapshot=snapshot))
    await ops.interact(click(ops, ts, "Approve"))
    await ops.wait_until(lambda: runs(ops.database)[0].status == "failed", what="run failed")
    assert sample_tools.CALLS == []
    rows = audit_rows(ops.database)
    refused = [r for r in rows if r[0] == "tool_binding_refused"]
    assert len(refused) == 1 and refused[0][1] == "refused"
    assert refused[0][2]["approved"] == requests(ops.database)[0].binding[:12]
    assert refused[0][2]["pending"] != refused[0][2]["approved"]
    assert "tool_started" not in [r[0] for r in rows]
    await ops.wait_until(lambda: any("not the call that was approved" in t
                                     for t in thread(ops)), what="starter told")


HOSTILE = {"service": "<!channel> <@U0ALICE> api",
           "note": "<javascript:alert(1)|Click me> [x](javascript:alert(1)) <at id=all></at>"}


@pytest.mark.parametrize("tools", [[{"python": "tests.tools.sample_tools:deploy",
                                     "approval": "always"}]])
async def test_hostile_argument_values_are_inert_on_the_card(
    ops: Slack, script: Scripted
) -> None:
    script.steps = ([("deploy", {"version": HOSTILE["service"] + " " + HOSTILE["note"]})],)
    await start(ops)
    ts = await ops.wait_for_card()
    card = ops.card_message(ts)
    assert validate_blocks(card.blocks) is None
    text = json.dumps(card.blocks)
    for raw in ("<!channel>", "<@U0ALICE>", "<javascript:", "<at id=all>"):
        assert raw not in text
    assert "&lt;!channel&gt;" in text and "&lt;javascript:alert(1)|Click me&gt;" in text
    assert all(s.get("text", {}).get("verbatim") for s in card.blocks if s["type"] == "section")


@pytest.mark.parametrize("tools", [[MCP_SCALE]], ids=["mcp"])
async def test_mcp_tool_behind_approval_runs_once_on_approve(
    ops: Slack, script: Scripted, _mcp_journal: Path
) -> None:
    journal = _mcp_journal
    script.steps = ([("scale", {"service": "api", "replicas": 3})],)
    await start(ops)
    ts = await ops.wait_for_card()
    assert "Scale a service to a number of replicas." in json.dumps(ops.card_message(ts).blocks)
    assert journal_lines(journal) == []
    await ops.interact(click(ops, ts, "Approve"))
    assert await finished(ops) == "scale success: api now runs 3 replica(s)"
    assert [line.split(" pid=")[0] for line in journal_lines(journal)] == ["scale api 3"]


