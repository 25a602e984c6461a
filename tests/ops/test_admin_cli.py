"""``askhuman requests | runs | audit`` black-box on a database the served app filled."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from pathlib import Path
from typing import Any

from click.testing import Result
from sqlalchemy import select
from typer.testing import CliRunner

from bot.cli import app
from storage import HumanRequest, Run
from tests.api.conftest import Door
from tests.slack.conftest import ALICE, APPROVALS, MALLORY


async def cli(*args: str) -> Result:
    """Run ``askhuman`` in a thread (commands may run their own event loop)."""
    return await asyncio.to_thread(CliRunner().invoke, app, list(args))


def as_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


async def start(ops: Door) -> tuple[str, str]:
    """Start the deploy agent from Slack; returns (ref, Slack ts) once both cards are out."""
    assert (await ops.slack.command("run deploy ship v1.0.0")).status_code == 200
    ts = await ops.slack.wait_for_card()
    await ops.feishu_card()
    with ops.database.transaction() as session:
        ref = session.scalars(select(HumanRequest.ref)).one()
    return ref, ts


def run_row(ops: Door) -> Run:
    with ops.database.transaction() as session:
        return session.scalars(select(Run)).one()


async def wait_for(predicate: Any, what: str, timeout: float = 15) -> None:
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def test_list_show_runs_and_export_on_a_served_database(ops: Door, config: Path) -> None:
    ref, ts = await start(ops)
    refused = ops.slack.click_payload(ts, "Approve", MALLORY)
    await ops.slack.interact(refused)
    await ops.slack.interact(refused)

    listed = as_json(await cli("requests", "list", "--status", "open", "--json",
                               "--config", str(config)))
    assert [(r["ref"], r["status"], r["route"], r["agent"]) for r in listed] == [
        (ref, "open", "ops", "deploy")]
    assert as_json(await cli("requests", "list", "--status", "decided", "--json",
                             "--config", str(config))) == []
    assert as_json(await cli("requests", "list", "--route", "nope", "--json",
                             "--config", str(config))) == []
    assert as_json(await cli("requests", "list", "--agent", "deploy", "--since", "1h",
                             "--json", "--config", str(config)))[0]["ref"] == ref
    words = await cli("requests", "list", "--config", str(config))
    assert words.exit_code == 0 and ref in words.stdout and "open" in words.stdout

    await ops.approve_in_slack(ts)
    await wait_for(lambda: run_row(ops).status == "succeeded", "the run to finish")

    shown = as_json(await cli("requests", "show", ref, "--json", "--config", str(config)))
    assert shown["status"] == "decided" and shown["decided_by"]
    assert "v1.0.0" in shown["card"] and "Answered" in shown["card"]
    assert shown["policy"]["source"].startswith("frozen")
    assert shown["policy"]["rules"]["slack"]["channel"] == APPROVALS
    assert [(v["user"], v["action"]) for v in shown["votes"]] == [(ALICE, "approve")]
    assert sorted(d["platform"] for d in shown["deliveries"]) == ["feishu", "slack"]
    assert all(d["message_id"] and d["channel"] for d in shown["deliveries"])
    events = [(a["event"], a["occurrences"]) for a in shown["audit"]]
    assert ("respond_unauthorized", 2) in events
    text = await cli("requests", "show", ref, "--config", str(config))
    assert text.exit_code == 0 and "Deliveries:" in text.stdout and "×2" in text.stdout
    missing = await cli("requests", "show", "nope", "--config", str(config))
    assert missing.exit_code == 1 and "no request 'nope'" in missing.output

    runs = as_json(await cli("runs", "list", "--json", "--config", str(config)))
    assert [(r["agent"], r["status"]) for r in runs] == [("deploy", "succeeded")]
    run = as_json(await cli("runs", "show", runs[0]["id"], "--json", "--config", str(config)))
    assert run["requests"][0]["ref"] == ref and "Deployed v1.0.0" in str(run["output"])
    assert (await cli("runs", "show", "nope", "--config", str(config))).exit_code == 1

    lines = (await cli("audit", "export", "--since", "1d", "--config", str(config))).stdout
    rows = [json.loads(line) for line in lines.splitlines()]
    assert "respond_unauthorized" in {r["event"] for r in rows} and len(rows) >= 3
    assert [r["id"] for r in rows] == sorted(r["id"] for r in rows)
    table = (await cli("audit", "export", "--format", "csv", "--config", str(config))).stdout
    parsed = list(csv.DictReader(io.StringIO(table)))
    assert [int(r["id"]) for r in parsed] == [r["id"] for r in rows]
    exported = as_json(await cli("audit", "export", "--json", "--config", str(config)))
    assert exported == rows
    future = await cli("audit", "export", "--since", "2999-01-01", "--config", str(config))
    assert future.exit_code == 0 and future.stdout == ""
    bad = await cli("audit", "export", "--since", "yesterday", "--config", str(config))
    assert bad.exit_code == 2 and "--since 'yesterday'" in bad.output
    badfmt = await cli("audit", "export", "--format", "xml", "--config", str(config))
    assert badfmt.exit_code == 2


async def test_cancel_updates_every_copy_and_the_agent_gets_cancelled(
    ops: Door, config: Path
) -> None:
    ref, ts = await start(ops)
    card = await ops.feishu_card()
    no_reason = await cli("requests", "cancel", ref, "--reason", " ", "--config", str(config))
    assert no_reason.exit_code == 2

    done = as_json(await cli("requests", "cancel", ref, "--reason", "wrong release",
                             "--json", "--config", str(config)))
    assert done == {"ref": ref, "outcome": "accepted", "message": done["message"]}
    assert "wrong release" in done["message"]

    # The served app delivers what the CLI queued: both card copies, then the resume.
    await wait_for(lambda: bool(card.patches), "the Feishu card to be patched")
    await wait_for(lambda: "Cancelled" in str(ops.slack.card_message(ts).blocks),
                   "the Slack card to show the cancellation")
    assert "wrong release" in card.patches[-1] or "Cancelled" in card.patches[-1]
    await wait_for(lambda: run_row(ops).status == "succeeded", "the agent to resume")
    run = run_row(ops)
    assert "not started" in str(run.output) and "wrong release" in str(run.output)
    with ops.database.transaction() as session:
        request = session.scalars(select(HumanRequest)).one()
        assert request.status == "cancelled" and request.decided_by_platform == "cli"

    again = await cli("requests", "cancel", ref, "--reason", "twice", "--config", str(config))
    assert again.exit_code == 1 and "already_decided" in again.stdout
    audit = as_json(await cli("requests", "show", ref, "--json", "--config", str(config)))
    assert [a["event"] for a in audit["audit"] if a["actor_platform"] == "cli"] == [
        "cancelled", "cancelled_too_late"]
