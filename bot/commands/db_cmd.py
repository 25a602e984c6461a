"""``askhuman db upgrade`` / ``current`` / ``prune``: the database schema and its upkeep."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated

import typer

import storage
from bot.settings import ConfigError, Settings, load_settings
from storage.db import current_revision, head_revision

ConfigOpt = Annotated[Path | None, typer.Option(help="Config file (for database_url).")]
DatabaseOpt = Annotated[str | None, typer.Option(help="Database URL (overrides the config).")]

db_app = typer.Typer(help="Database schema (Alembic migrations).", no_args_is_help=True)


def _settings(config: Path | None) -> Settings:
    try:
        return load_settings(config)
    except ConfigError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None


def _url(config: Path | None, database: str | None) -> str:
    return database or _settings(config).database_url


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


@db_app.command("prune")
def prune(
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Apply the config's retention now (what the running bot does every 10 minutes):
    redact old answers and transcripts, delete old audit rows, dedupe keys and
    finished outbox rows."""
    from bot.engine.cards import to_db_time
    from bot.engine.housekeeping import (
        OUTBOX_RETENTION,
        SEEN_RETENTION,
        apply_retention,
    )
    from bot.engine.housekeeping import prune as prune_rows

    settings = _settings(config)
    url = database or settings.database_url
    if current_revision(url) != head_revision():
        typer.echo("error: the database schema is not current; run `askhuman db upgrade` "
                   "first", err=True)
        raise typer.Exit(2)
    db = storage.Database(url)
    try:
        now = to_db_time(dt.datetime.now(dt.UTC))
        counts = prune_rows(db, now, SEEN_RETENTION, OUTBOX_RETENTION)
        counts |= apply_retention(db, now, settings.retention)
    finally:
        db.dispose()
    kept = [name for name, value in settings.retention.model_dump().items() if value is None]
    for name, count in counts.items():
        typer.echo(f"{name}: {count}")
    if kept:
        typer.echo(f"kept forever (not set under retention:): {', '.join(kept)}")


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")
