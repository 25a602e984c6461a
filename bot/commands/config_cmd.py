"""``askhuman config check FILE``: validate an admin config before deploying it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bot.settings import ConfigError, load_file

config_app = typer.Typer(help="Admin configuration.", no_args_is_help=True)


@config_app.command("check")
def check(
    file: Annotated[Path, typer.Argument(help="The YAML config file to validate.")],
) -> None:
    """Exit 0 if FILE is valid; otherwise list each problem with its key path (exit 1)."""
    try:
        parsed = load_file(file)
    except ConfigError as exc:
        typer.echo(f"{exc.source} is not valid:", err=True)
        for problem in exc.problems:
            typer.echo(f"  - {problem}", err=True)
        raise typer.Exit(1) from None
    typer.echo(
        f"{file} is valid: {len(parsed.agents)} agent(s), {len(parsed.routes)} route(s)."
    )


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")
