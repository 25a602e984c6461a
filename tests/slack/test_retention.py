"""Served path: a flood of refused clicks over Slack HTTP is counted on one audit row,
every click still gets its ephemeral answer; ``askhuman db prune`` applies retention."""

from __future__ import annotations

import asyncio
from pathlib import Path

import yaml
from sqlalchemy import select
from typer.testing import CliRunner

from bot.cli import app
from storage import AuditLog, Run
from tests.slack.conftest import ALICE, MALLORY, Slack


async def test_refused_click_flood_is_one_counted_audit_row(slack: Slack) -> None:
    assert (await slack.command("run deploy ship v1.0.0")).status_code == 200
    ts = await slack.wait_for_card()
    payload = slack.click_payload(ts, "Approve", MALLORY)
    responses = await asyncio.gather(*(slack.interact(payload) for _ in range(25)))
    assert {r.status_code for r in responses} == {200}
    await slack.wait_until(lambda: len(slack.ephemerals_to(MALLORY)) == 25, timeout=20,
                           what="25 refusals explained")
    with slack.database.transaction() as session:
        rows = session.scalars(select(AuditLog).where(AuditLog.actor_user == MALLORY)).all()
        assert [(r.event, r.occurrences) for r in rows] == [("respond_unauthorized", 25)]
        assert rows[0].last_seen_at is not None and rows[0].last_seen_at >= rows[0].created_at
    assert slack.request_row().status == "pending"


async def test_db_prune_applies_the_configured_retention(slack: Slack, tmp_path: Path) -> None:
    assert (await slack.command("run deploy ship v1.0.0")).status_code == 200
    ts = await slack.wait_for_card()
    await slack.interact(slack.click_payload(ts, "Approve", ALICE))
    await slack.wait_until(lambda: _finished(slack), timeout=20, what="the run to finish")
    config = tmp_path / "askhuman.yaml"
    settings = {
        "database_url": slack.database.url,
        "agents": {"deploy": {"model": "scripted:deploy", "route": "ops"}},
        "routes": {"ops": {"console": {"enabled": True}}},
    }
    config.write_text(yaml.safe_dump(settings))
    kept = CliRunner().invoke(app, ["db", "prune", "--config", str(config)])
    assert kept.exit_code == 0, kept.output
    assert "transcripts_redacted: 0" in kept.output
    assert "kept forever (not set under retention:): answers, transcripts, audit" in kept.output

    settings["retention"] = {"answers": "1s", "transcripts": "1s"}
    config.write_text(yaml.safe_dump(settings))
    await asyncio.sleep(1.1)
    result = CliRunner().invoke(app, ["db", "prune", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert "transcripts_redacted: 1" in result.output and "answers_redacted: 1" in result.output
    with slack.database.transaction() as session:
        run = session.scalars(select(Run)).one()
        assert run.snapshot is None and "ship v1.0.0" not in run.prompt

    settings["retention"] = {"answers": "90 days"}
    config.write_text(yaml.safe_dump(settings))
    bad = CliRunner().invoke(app, ["db", "prune", "--config", str(config)])
    assert bad.exit_code == 2 and "retention.answers" in bad.output


def _finished(slack: Slack) -> bool:
    with slack.database.transaction() as session:
        run = session.scalars(select(Run)).first()
        return run is not None and run.status == "succeeded"
