"""``askhuman delegate``: hand an approver's approvals to someone until a date.

Admins (with the database's own credentials) add, list and revoke delegations for any
person; people do it themselves with ``/askhuman delegate`` on Slack or the
``delegate`` bot command on Feishu. See ``bot.engine.delegation`` for the rules.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated

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

delegate_app = typer.Typer(help="Delegations (out of office): who answers for whom, until "
                                "when.", no_args_is_help=True)
PlatformOpt = Annotated[str, typer.Option(help="slack, feishu or console (user ids are per "
                                               "platform).")]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def _platform(value: str) -> str:
    if value not in ("slack", "feishu", "console"):
        raise fail(f"--platform {value!r} is not one of: slack, feishu, console")
    return value


@delegate_app.command("add")
def add(
    from_user: Annotated[str, typer.Option("--from", help="The approver who is away "
                                                          "(user id, e.g. U0123 or ou_…).")],
    to_user: Annotated[str, typer.Option("--to", help="Who answers for them.")],
    until: Annotated[str, typer.Option(help="End date (2026-12-24: ends when that day "
                                            "starts, UTC) or an ISO time.")],
    platform: PlatformOpt = "slack",
    from_name: Annotated[str | None, typer.Option(help="Name shown on cards.")] = None,
    to_name: Annotated[str | None, typer.Option(help="Name shown on cards.")] = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Let --to answer whatever --from may answer until --until (not runs --to started)."""
    from bot.engine import delegation
    from bot.engine.ports import Identity

    platform = _platform(platform)
    now = _now()
    with served_database(config, database) as (_settings, db):
        try:
            moment = delegation.parse_until(until, now)
            with db.transaction() as session:
                view = delegation.add(session, now, Identity(platform, from_user, from_name),
                                      Identity(platform, to_user, to_name), moment,
                                      "cli")
        except delegation.DelegationError as exc:
            raise fail(str(exc)) from None
    typer.echo(f"Delegation {view.id}: {to_name or to_user} answers for {from_name or from_user}"
               f" on {platform} until {view.as_dict()['until']}.")


@delegate_app.command("list")
def list_delegations(
    platform: Annotated[str | None, typer.Option(help="Only this platform.")] = None,
    user: Annotated[str | None, typer.Option(help="Only delegations from or to this user.")]
    = None,
    ended: Annotated[bool, typer.Option("--all", help="Include expired and revoked ones.")]
    = False,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Active delegations (``--all``: expired and revoked ones too)."""
    from bot.engine import delegation

    with served_database(config, database) as (_settings, db), db.transaction() as session:
        rows = [v.as_dict() for v in delegation.listing(session, _now(), platform, user,
                                                        ended)]
    emit(rows, as_json, lambda r: table(r, ["id", "platform", "from", "to", "until", "state"]))


@delegate_app.command("revoke")
def revoke(
    from_user: Annotated[str, typer.Option("--from", help="The approver.")],
    to_user: Annotated[str | None, typer.Option("--to", help="Only this delegate (default: "
                                                             "all of theirs).")] = None,
    platform: PlatformOpt = "slack",
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """End delegations now; the delegate's next click is refused with a clear message."""
    from bot.engine import delegation
    from bot.engine.ports import Identity

    platform = _platform(platform)
    with served_database(config, database) as (_settings, db), db.transaction() as session:
        ended = delegation.revoke(session, _now(), Identity(platform, from_user), to_user,
                                  "cli")
    if not ended:
        raise fail(f"no active delegation from {from_user}"
                   + (f" to {to_user}" if to_user else "") + f" on {platform}", code=1)
    typer.echo(f"Revoked {ended} delegation(s) from {from_user}.")


def register(app: typer.Typer) -> None:
    app.add_typer(delegate_app, name="delegate")
