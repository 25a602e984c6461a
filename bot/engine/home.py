"""Home: the runs one person started, with their state (Slack App Home lists them).

One indexed query (``ix_runs_started_by``) for the newest runs, one for the open
requests of those still waiting; nothing is rendered here.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.engine import store
from renderers.card import RunLine
from storage import HumanRequest, Run

RUNS_SHOWN = 10


def runs_started_by(session: Session, platform: str, user_id: str, limit: int) -> list[RunLine]:
    """The newest ``limit`` runs ``user_id`` started on ``platform``, newest first."""
    runs = session.scalars(
        select(Run).where(Run.started_by_platform == platform, Run.started_by_user == user_id)
        .order_by(Run.created_at.desc(), Run.id.desc()).limit(limit)).all()
    waiting = [run.id for run in runs if run.status == "waiting"]
    asks: dict[str, str] = {}
    if waiting:
        for run_id, args in session.execute(
                select(HumanRequest.run_id, HumanRequest.args)
                .where(HumanRequest.run_id.in_(waiting), HumanRequest.status == store.OPEN)
                .order_by(HumanRequest.id)):
            if isinstance(args, dict):
                asks.setdefault(run_id, str(args.get("title") or args.get("question") or ""))
    return [RunLine(run.id, run.agent, run.status, run.prompt, run.created_at,
                    asks.get(run.id) or None) for run in runs]
