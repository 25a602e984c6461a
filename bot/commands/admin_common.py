"""What the admin commands share: opening the served database, ``--since``, output.

Every admin command reads the same config and database as ``serve`` and prints
either words for people or, with ``--json``, one JSON document for scripts.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

import storage
from bot.settings import ConfigError, Settings, load_settings
from storage.db import current_revision, head_revision

ConfigOpt = Annotated[Path | None, typer.Option(help="Config file (same as `serve`).")]
DatabaseOpt = Annotated[str | None, typer.Option(help="Database URL (overrides the config).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]

_SINCE = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
SINCE_HINT = 'write "30m", "12h", "2d", "1w" or a date like 2026-01-31 (UTC)'


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``message`` to stderr and return the exit to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def settings_from(config: Path | None) -> Settings:
    try:
        return load_settings(config)
    except ConfigError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None


@contextmanager
def served_database(
    config: Path | None, database: str | None
) -> Iterator[tuple[Settings, storage.Database]]:
    """The config and the database ``serve`` uses; refuses an out-of-date schema
    (the admin commands read columns only the current schema has)."""
    settings = settings_from(config)
    url = database or settings.database_url
    if database:
        settings = settings.model_copy(update={"database_url": database})
    if current_revision(url) != head_revision():
        raise fail("the database schema is not current; run `askhuman db upgrade` first")
    db = storage.Database(url)
    try:
        yield settings, db
    finally:
        db.dispose()


def parse_since(value: str | None, now: dt.datetime) -> dt.datetime | None:
    """``"2d"`` → two days before ``now``; ``"2026-01-31"`` (or a full ISO time) as UTC.
    Returns a naive UTC datetime, as the database stores them."""
    if value is None:
        return None
    if match := _SINCE.match(value):
        moment = now - dt.timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])
    else:
        try:
            moment = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise fail(f"--since {value!r} is not a time; {SINCE_HINT}") from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC)
    return moment.replace(tzinfo=None)


def iso(moment: dt.datetime | None) -> str | None:
    """A stored (naive UTC) time as ISO 8601 with ``Z``."""
    if moment is None:
        return None
    aware = moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
    return aware.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def emit(data: Any, as_json: bool, words: Callable[[Any], str]) -> None:
    """``--json``: the data as JSON; otherwise the words people read."""
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str) if as_json
               else words(data))


def table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """A plain aligned table (no dependency; cells are shortened to 40 characters)."""
    if not rows:
        return "(none)"
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(line.rstrip() for line in lines)


def _cell(value: Any) -> str:
    text = "-" if value is None else str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= 40 else text[:39] + "…"
