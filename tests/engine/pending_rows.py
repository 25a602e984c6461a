"""Open requests written straight into the database, many at once (pending-list tests)."""

from __future__ import annotations

import datetime as dt
import uuid

from bot.askhuman.schema import AskHumanToolArgs
from bot.engine import store
from storage import Database, Run

T = dt.datetime(2025, 3, 1, 12, 0)


def add_open_requests(
    database: Database, route: str, count: int, *, starter: str = "U_STARTER",
    platform: str = "slack", escalated_to: str | None = None, question: str = "Q",
) -> list[str]:
    """``count`` open requests on ``route`` (one run each); returns their refs in order."""
    refs = []
    with database.transaction() as session:
        for i in range(count):
            run = Run(id=uuid.uuid4().hex, agent="deploy", prompt="p", status="waiting",
                      started_by_platform=platform, started_by_user=starter,
                      started_by_name=None, origin_platform=platform, origin_channel="C",
                      origin_thread=None, created_at=T, updated_at=T)
            session.add(run)
            session.flush()
            args = AskHumanToolArgs.model_validate({
                "question": f"{question} {i}", "actions": [{"id": "approve", "label": "Approve"}]})
            request = store.create_request(session, T, run, "call_1", args, route, 1,
                                           T + dt.timedelta(days=1))
            if escalated_to is not None:
                request.escalated_at, request.escalation_route = T, escalated_to
            refs.append(request.ref)
    return refs
