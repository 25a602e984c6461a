"""A standing grant's uses are counted exactly across ``serve --workers 2`` (real
processes on one port, SQLite and PostgreSQL): ten approvals at once against a grant of
three uses get three answers from the grant and seven cards, whichever worker each
reached."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml
from sqlalchemy import select

from storage import AuditLog, Database, HumanRequest
from storage.grants import Grant
from tests.api.conftest import SECRET_KEY, add_client
from tests.api.test_grants import RESTART, grant_click
from tests.fakes.asgi_server import free_port
from tests.slack.conftest import ALICE, APPROVALS
from tests.slack.workers_harness import (
    askhuman,
    client,
    fake_slack,
    live_instances,
    slack_env,
    stop,
    until,
    wait_healthy,
)


def _config(tmp_path: Path, db_url: str) -> Path:
    path = tmp_path / "askhuman.yaml"
    path.write_text(yaml.safe_dump({
        "database_url": db_url,
        "agents": {"deploy": {"model": "scripted:deploy", "route": "ops"}},
        "routes": {"ops": {"timeout": "30m",
                           "slack": {"channel": APPROVALS, "approvers": {"users": [ALICE]}},
                           "grants": {"max_duration": "8h", "max_uses": 3}}},
    }))
    return path


async def test_grant_uses_are_counted_exactly_across_workers(
    tmp_path: Path, db_url: str,
) -> None:
    database = Database(db_url)
    database.upgrade()
    ci = add_client(database, "ci-bot", ["ops"])
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with fake_slack() as fake:
        proc = askhuman(["serve", "--config", str(_config(tmp_path, db_url)), "--port",
                         str(port), "--workers", "2", "--log-level", "warning"],
                        slack_env(fake, ASKHUMAN_SECRET_KEY=SECRET_KEY))
        try:
            await wait_healthy(url, proc)
            await until(lambda: len(live_instances(database)) == 2, 60, "2 workers beating")
            async with client(url, fake) as slack:

                async def approval() -> dict[str, Any]:
                    created = await slack.http.post(f"{url}/api/v1/approvals", json=RESTART,
                                                    headers=ci.headers)
                    assert created.status_code == 201, created.text
                    body: dict[str, Any] = created.json()
                    return body

                first = await approval()
                await until(lambda: any(first["ref"] in str(m.blocks)
                                        for m in list(fake.messages.values()) if m.blocks),
                            30, "the first card")
                ts = next(m.ts for m in list(fake.messages.values())
                          if m.blocks and first["ref"] in str(m.blocks))
                click = grant_click(SimpleNamespace(slack=slack), ts, "1h", "3")  # type: ignore[arg-type]
                assert (await slack.interact(click)).status_code == 200
                decided = await slack.http.get(f"{url}/api/v1/requests/{first['ref']}?wait=20",
                                               headers=ci.headers)
                assert decided.json()["status"] == "submitted", decided.text
                answers = await asyncio.gather(*(approval() for _ in range(10)))
            assert sorted(a["status"] for a in answers) == ["pending"] * 7 + ["submitted"] * 3
            with database.transaction() as session:
                assert session.scalars(select(Grant.uses)).one() == 3
                used = session.scalars(select(AuditLog).where(
                    AuditLog.event == "grant_used")).all()
                pending = session.scalars(select(HumanRequest).where(
                    HumanRequest.status == "pending")).all()
                assert len(used) == 3 and len(pending) == 7
        finally:
            tail = stop(proc)
            database.dispose()
        assert proc.returncode == 0, tail
