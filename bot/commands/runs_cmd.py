"""``askhuman runs list | show ID``: agent runs and the requests they asked."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

import typer
from sqlalchemy import select

from bot.commands.admin_common import (
    ConfigOpt,
    DatabaseOpt,
    JsonOpt,
    emit,
    fail,
    iso,
    parse_since,
    served_database,
    table,
)
from bot.commands.requests_cmd import summary
from storage import HumanRequest, Run

runs_app = typer.Typer(help="Agent runs.", no_args_is_help=True)


def run_row(run: Run) -> dict[str, Any]:
    return {"id": run.id, "agent": run.agent, "status": run.status,
            "started_by": f"{run.started_by_platform}:{run.started_by_user}",
            "started_by_name": run.started_by_name, "origin": run.origin_platform,
            "created_at": iso(run.created_at), "updated_at": iso(run.updated_at)}


@runs_app.command("list")
def list_runs(
    status: Annotated[str | None, typer.Option(help="Only runs in this state.")] = None,
    agent: Annotated[str | None, typer.Option(help="Only this agent.")] = None,
    since: Annotated[str | None, typer.Option(help='Started since, e.g. "2d".')] = None,
    limit: Annotated[int, typer.Option(help="At most this many (newest first).")] = 200,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List runs, newest first."""
    after = parse_since(since, dt.datetime.now(dt.UTC))
    with served_database(config, database) as (_, db), db.transaction() as session:
        query = select(Run).order_by(Run.created_at.desc(), Run.id.desc()).limit(limit)
        if status is not None:
            query = query.where(Run.status == status)
        if agent is not None:
            query = query.where(Run.agent == agent)
        if after is not None:
            query = query.where(Run.created_at >= after)
        rows = [run_row(run) for run in session.scalars(query)]
    emit(rows, as_json, lambda data: table(
        data, ["id", "agent", "status", "started_by", "created_at"]))


@runs_app.command("show")
def show_run(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One run: its state, output or error, and its requests."""
    with served_database(config, database) as (_, db), db.transaction() as session:
        run = session.get(Run, run_id)
        if run is None:
            raise fail(f"no run {run_id!r}", 1)
        requests = session.scalars(select(HumanRequest).where(HumanRequest.run_id == run_id)
                                   .order_by(HumanRequest.id)).all()
        data = {**run_row(run), "output": run.output, "error": run.error,
                "requests": [summary(r, run) for r in requests]}

    def words(d: dict[str, Any]) -> str:
        head = [f"Run {d['id']}  agent {d['agent']}  {d['status']}",
                f"Started by {d['started_by']} at {d['created_at']}"]
        if d["error"]:
            head.append(f"Error: {d['error']}")
        if d["output"] is not None:
            head.append(f"Output: {d['output']}")
        return "\n".join([*head, "", "Requests:", table(
            d["requests"], ["ref", "status", "route", "created_at", "title"])])

    emit(data, as_json, words)


def register(app: typer.Typer) -> None:
    app.add_typer(runs_app, name="runs")
