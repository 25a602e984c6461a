"""``askhuman grants list | show | revoke``: standing grants, from the terminal.

Reads the database ``serve`` writes. ``revoke`` goes through the engine, audited as the
operator (``grant_revoked``); it takes effect at once, on every replica: the next
matching call gets a card. ``revoke --route R --all`` revokes every active grant of a
route, e.g. after removing ``grants`` from it (that stops new grants, not old ones).
"""

from __future__ import annotations

import asyncio
import getpass
from typing import Annotated, Any

import typer

from bot.commands.admin_common import (
    ConfigOpt,
    DatabaseOpt,
    JsonOpt,
    emit,
    fail,
    served_database,
    table,
)
from bot.commands.requests_cmd import OPERATOR_PLATFORM
from bot.engine import grant_rows
from bot.engine.ports import Identity
from bot.engine.results import GrantView

grants_app = typer.Typer(help="Standing grants: list, show and revoke.", no_args_is_help=True)


def row(grant: GrantView) -> dict[str, Any]:
    return {"id": grant.label, "route": grant.route, "agent": grant.agent, "tool": grant.tool,
            "scope": grant.scope or "same arguments", "granted_by": grant.granted_by,
            "uses": f"{grant.uses}/{grant.max_uses}", "uses_left": grant.uses_left,
            "created_at": grant.created_at.isoformat(), "expires_at": grant.expires_at.isoformat(),
            "revoked_at": grant.revoked_at.isoformat() if grant.revoked_at else None,
            "expired_at": grant.expired_at.isoformat() if grant.expired_at else None,
            "request": grant.request_ref, "args": grant.args}


@grants_app.command("list")
def list_grants(
    route: Annotated[str | None, typer.Option(help="Only this route's grants.")] = None,
    include_inactive: Annotated[bool, typer.Option(
        "--all", help="Also revoked, expired and used-up grants.")] = False,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Active grants, newest first (``--all``: every grant)."""
    from bot.engine.core import Engine

    with served_database(config, database) as (settings, db):
        found = asyncio.run(Engine(db, settings).grants_listed(
            route=route, include_inactive=include_inactive))
    rows = [row(g) for g in found]
    emit(rows, as_json, lambda r: table(r, ["id", "route", "agent", "tool", "scope", "uses",
                                            "expires_at", "granted_by", "revoked_at"]))


@grants_app.command("show")
def show(
    grant_id: Annotated[str, typer.Argument(help="The grant, e.g. G-7.")],
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One grant: its terms, the granted call and how much of it is used."""
    from bot.engine.core import Engine

    number = _number(grant_id)
    with served_database(config, database) as (settings, db):
        found = asyncio.run(Engine(db, settings).grant(number))
    if found is None:
        raise fail(f"no grant {grant_id!r}", 1)
    emit(row(found), as_json,
         lambda d: "\n".join(f"{k}: {v}" for k, v in d.items()))


@grants_app.command("revoke")
def revoke(
    grant_id: Annotated[str | None, typer.Argument(help="The grant, e.g. G-7.")] = None,
    route: Annotated[str | None, typer.Option(help="With --all: this route's grants.")] = None,
    every: Annotated[bool, typer.Option("--all", help="Every active grant of --route.")] = False,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Revoke one grant, or ``--route R --all`` every active grant of route R."""
    from bot.engine.core import Engine

    if (grant_id is None) == (not every):
        raise fail("name one grant (askhuman grants revoke G-7) or a route's grants "
                   "(askhuman grants revoke --route ops --all)")
    if every and not route:
        raise fail("--all needs --route ROUTE (the route whose grants to revoke)")
    user = getpass.getuser()
    operator = Identity(OPERATOR_PLATFORM, user, f"{user} (askhuman CLI)")
    with served_database(config, database) as (settings, db):
        engine = Engine(db, settings)

        async def go() -> list[tuple[str, str, str]]:
            ids = [_number(grant_id)] if grant_id is not None else [
                g.id for g in await engine.grants_listed(route=route)]
            done: list[tuple[str, str, str]] = []
            for number in ids:
                answer = await engine.revoke_grant_as_operator(number, operator)
                done.append((grant_rows.label(number), answer.outcome, answer.message))
            return done

        results = asyncio.run(go())
    data = [{"id": g, "outcome": o, "message": m} for g, o, m in results]
    emit(data, as_json, lambda d: "\n".join(f"{r['id']}: {r['outcome']} ({r['message']})"
                                            for r in d) or "no active grants to revoke")
    if any(r["outcome"] not in ("accepted",) for r in data):
        raise typer.Exit(1)


def _number(text: str | None) -> int:
    number = grant_rows.parse_label(text or "")
    if number is None:
        raise fail(f"{text!r} is not a grant id; write it like G-7")
    return number


def register(app: typer.Typer) -> None:
    app.add_typer(grants_app, name="grants")
