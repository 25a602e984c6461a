"""``askhuman audit export | verify``: the audit log as JSON Lines or CSV, and its
hash chain checked (``bot.engine.audit_chain``)."""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import io
import json
from typing import Annotated

import typer
from sqlalchemy import select

from bot.commands.admin_common import (
    ConfigOpt,
    DatabaseOpt,
    JsonOpt,
    fail,
    parse_since,
    served_database,
)
from bot.commands.requests_cmd import audit_row
from storage import AuditLog

audit_app = typer.Typer(help="The audit log.", no_args_is_help=True)
CSV_COLUMNS = ["id", "at", "event", "outcome", "run_id", "ref", "actor_platform", "actor",
               "reason", "details", "occurrences", "last_seen_at"]


@audit_app.command("export")
def export(
    since: Annotated[str | None, typer.Option(help='Rows since, e.g. "2d" or 2026-01-31.')]
    = None,
    format: Annotated[str, typer.Option("--format", help="jsonl | csv")] = "jsonl",
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write the audit rows (oldest first) to stdout. ``--json``: one JSON array."""
    if format not in ("jsonl", "csv"):
        raise fail(f"--format {format!r} is not jsonl or csv")
    after = parse_since(since, dt.datetime.now(dt.UTC))
    with served_database(config, database) as (_, db), db.transaction() as session:
        query = select(AuditLog).order_by(AuditLog.id)
        if after is not None:
            query = query.where(AuditLog.created_at >= after)
        rows = [audit_row(row) for row in session.scalars(query)]
    if as_json:
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
    elif format == "jsonl":
        for row in rows:
            typer.echo(json.dumps(row, ensure_ascii=False, sort_keys=True))
    else:
        out = io.StringIO()
        writer = csv.DictWriter(out, CSV_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "details": json.dumps(row["details"], ensure_ascii=False,
                                                          sort_keys=True)})
        typer.echo(out.getvalue(), nl=False)


@audit_app.command("verify")
def verify(
    seal: Annotated[bool, typer.Option(help="Seal rows written since the bot's last "
                                            "sealing round first.")] = True,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Walk the audit hash chain; name the first row that was changed or removed.
    Exit status 1 if the chain is broken."""
    from bot.engine import audit_chain

    with served_database(config, database) as (_, db):
        if seal:
            now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
            with db.transaction() as session:
                while audit_chain.seal(session, now) == audit_chain.SEAL_BATCH:
                    pass
        with db.read() as session:
            verdict = audit_chain.verify(session)
    data = dataclasses.asdict(verdict)
    if as_json:
        typer.echo(json.dumps(data, indent=2))
    elif verdict.ok:
        typer.echo(f"audit chain intact: {verdict.checked} rows checked, {verdict.gaps} "
                   f"retention gap(s), {verdict.unsealed} row(s) not sealed yet")
    else:
        where = f"row {verdict.broken_id}" if verdict.broken_id is not None else "the end"
        typer.echo(f"audit chain BROKEN at {where}: {verdict.problem} "
                   f"({verdict.checked} rows before it are intact)")
    if not verdict.ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(audit_app, name="audit")
