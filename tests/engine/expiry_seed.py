"""Many pending requests inserted in bulk (the expiry tests and benchmarks/expiry.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import insert

from storage import Database, HumanRequest, Run

ARGS: dict[str, Any] = {"question": "Deploy?", "fields": [], "urgency": "normal",
                        "actions": [{"id": "approve", "label": "Approve", "style": "primary"}]}


def seed(db: Database, now: dt.datetime, requests: list[tuple[str, str | None, int | None]],
         prefix: str = "r") -> None:
    """``requests``: one ``(run id, batch, deadline minutes from now or None)`` each;
    every run named is created ``waiting`` for agent ``deploy``."""
    runs = sorted({run_id for run_id, _, _ in requests})
    with db.transaction() as session:
        for start in range(0, len(runs), 2000):
            session.execute(insert(Run), [
                {"id": run_id, "agent": "deploy", "started_by_platform": "slack",
                 "started_by_user": "U_STARTER", "started_by_name": None,
                 "origin_platform": "slack", "origin_channel": "C_OPS", "origin_thread": None,
                 "status": "waiting", "prompt": "p", "snapshot": None, "output": None,
                 "error": None, "created_at": now, "updated_at": now, "redacted_at": None}
                for run_id in runs[start:start + 2000]])
        rows = [
            {"ref": f"{prefix}{i:06d}", "run_id": run_id, "tool_call_id": f"c{i}",
             "args": ARGS, "route": "ops", "quorum": 1, "status": "pending",
             "deadline": None if minutes is None else now + dt.timedelta(minutes=minutes),
             "version": 1, "reminders_sent": 0, "kind": "ask_human", "batch": batch,
             "created_at": now, "updated_at": now}
            for i, (run_id, batch, minutes) in enumerate(requests)
        ]
        for start in range(0, len(rows), 2000):
            session.execute(insert(HumanRequest), rows[start:start + 2000])
