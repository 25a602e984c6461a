"""``askhuman db upgrade`` / ``askhuman db current``: manage the database schema."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import storage
from bot.settings import ConfigError, load_settings
from storage.db import current_revision

ConfigOpt = Annotated[Path | None, typer.Option(help="Config file (for database_url).")]
DatabaseOpt = Annotated[str | None, typer.Option(help="Database URL (overrides the config).")]

db_app = typer.Typer(help="Database schema (Alembic migrations).", no_args_is_help=True)


def _url(config: Path | None, database: str | None) -> str:
    if database:
        return database
    try:
        return load_settings(config).database_url
    except ConfigError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None


@db_app.command("upgrade")
def upgrade(
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Apply every pending migration (safe to run repeatedly)."""
    url = _url(config, database)
    storage.upgrade(url)
    typer.echo(f"database is at revision {current_revision(url)}")


@db_app.command("current")
def current(
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Show the schema revision the database is at."""
    typer.echo(current_revision(_url(config, database)) or "(empty database)")


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")
