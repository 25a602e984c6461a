"""``askhuman config check FILE``: validate an admin config before deploying it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bot.settings import ConfigError, FileSettings, config_warnings, load_file


def config_invalid(exc: ConfigError, code: int, note: str = "") -> typer.Exit:
    """Print every problem of an invalid config (each names its key and the fix) to
    stderr; the exit to raise."""
    typer.echo(f"{exc.source} is not valid{note}:", err=True)
    for problem in exc.problems:
        typer.echo(f"  - {problem}", err=True)
    return typer.Exit(code)

config_app = typer.Typer(help="Admin configuration.", no_args_is_help=True)


@config_app.command("check")
def check(
    file: Annotated[Path, typer.Argument(help="The YAML config file to validate.")],
    strict: Annotated[bool, typer.Option(
        help="Treat warnings (e.g. an agent nobody may start) as errors.")] = False,
) -> None:
    """Exit 0 if FILE is valid; otherwise list each problem with its key path (exit 1).

    Warnings name settings that load but are probably not what you meant, such as an
    agent without ``starters`` (nobody can start it from chat); ``--strict`` fails on them.
    """
    try:
        parsed = load_file(file)
        _check_tools(file, parsed)
    except ConfigError as exc:
        raise config_invalid(exc, 1) from None
    warnings = config_warnings(parsed.agents)
    typer.echo(
        f"{file} is valid: {len(parsed.agents)} agent(s), {len(parsed.routes)} route(s)"
        + (f", {len(warnings)} warning(s):" if warnings else ".")
    )
    for warning in warnings:
        typer.echo(f"  - warning: {warning}", err=True)
    if warnings and strict:
        raise typer.Exit(1)


def _check_tools(file: Path, parsed: FileSettings) -> None:
    """Import paths, ``fixed`` keys and MCP commands, checked in this environment."""
    if not any(agent.tools for agent in parsed.agents.values()):
        return
    from bot.tools.check import check_tools

    problems, notes = check_tools({name: a.tools for name, a in parsed.agents.items()},
                                  reach=True)
    for note in notes:
        typer.echo(f"note: {note}", err=True)
    if problems:
        raise ConfigError(str(file), problems)


@config_app.command("reload")
def reload(
    config: Annotated[Path, typer.Option(help="The config file the bot runs with.")],
    pid_file: Annotated[Path, typer.Option(
        help="The serve process's pid file (serve writes it when ASKHUMAN_PID_FILE "
             "is set).")],
) -> None:
    """Validate CONFIG, then tell the running bot to reload it (SIGHUP). Nothing is
    sent if the file is invalid; the bot also re-validates and keeps its old config
    if the file changed to something invalid meanwhile."""
    import os
    import signal

    from bot.settings import load_settings

    try:
        load_settings(config)
    except ConfigError as exc:
        raise config_invalid(exc, 1, "; nothing was reloaded") from None
    try:
        pid = int(pid_file.read_text().strip())
        os.kill(pid, signal.SIGHUP)
    except (OSError, ValueError) as exc:
        typer.echo(f"error: cannot signal the bot via {pid_file}: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"asked process {pid} to reload {config}")


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")
