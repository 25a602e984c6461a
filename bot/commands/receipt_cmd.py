"""``askhuman receipt verify RECEIPT``: was this action really approved?"""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer
from sqlalchemy import select

from bot.commands.admin_common import ConfigOpt, DatabaseOpt, JsonOpt, emit, fail, served_database
from bot.engine import receipts, store
from storage import Vote

receipt_app = typer.Typer(help="Signed receipts of decisions.", no_args_is_help=True)


@receipt_app.command("verify")
def verify(
    receipt: Annotated[str, typer.Argument(help="The receipt (ahr1.….…).")],
    check_database: Annotated[bool, typer.Option(
        help="Also check it against the stored request (needs the database).")] = False,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check a receipt's signature (key from ASKHUMAN_RECEIPT_KEY). Exit 1 if it fails."""
    key = receipts.key_from_env()
    if key is None:
        raise fail(f"set {receipts.KEY_ENV} to the key the bot signs receipts with")
    try:
        checked = receipts.verify(receipt, key)
    except receipts.ReceiptError as exc:
        emit({"valid": False, "error": str(exc)}, as_json,
             lambda d: f"receipt INVALID: {d['error']}")
        raise typer.Exit(1) from None
    data: dict[str, object] = {"valid": True, **dataclasses.asdict(checked)}
    if check_database:
        with served_database(config, database) as (_, db), db.transaction() as session:
            request = store.get_request(session, checked.ref)
            votes = session.scalars(select(Vote).where(Vote.request_id == request.id)
                                    ).all() if request else []
            current = receipts.for_request(request, votes, key) if request else None
            data["grants"] = receipts.grant_events(session, checked.ref)
        data["matches_database"] = current == receipt.strip()
    emit(data, as_json, lambda d: (
        f"receipt valid: {d['ref']} {d['decision']} by {', '.join(d['deciders']) or '-'}"
        + (f"; the call ran as edited ({d['edited_args_hash']})"
           if d.get("edited_args_hash") else "")
        + ("" if "matches_database" not in d else
           "; matches the stored request" if d["matches_database"] else
           "; DOES NOT match the stored request")
        + "".join(f"\n  {g['event']} {g['grant']} at {g['at']}: {g['terms']}"
                  for g in d.get("grants") or [])))
    if data.get("matches_database") is False:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(receipt_app, name="receipt")
