"""``askhuman api-key``: create, list, revoke API clients and rotate webhook secrets.

The key and the webhook secret are printed once, at creation (the secret again at
``rotate-secret``). The database keeps only the key's SHA-256 hash and the secret
encrypted under ``ASKHUMAN_SECRET_KEY``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from bot.api.keys import SecretKeyError, box_from_env, hash_key, key_prefix, new_api_key
from bot.api.keys import new_webhook_secret as new_secret
from bot.engine import api_clients
from bot.settings import ConfigError, Settings, load_settings
from storage import Database

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")

ConfigOpt = Annotated[Path | None, typer.Option(help="Config file (routes, agents, database).")]
DatabaseOpt = Annotated[str | None, typer.Option(help="Database URL (overrides the config).")]

api_key_app = typer.Typer(help="API clients: keys for /api/v1, /mcp and askhuman mcp.",
                          no_args_is_help=True)


def _settings(config: Path | None) -> Settings:
    try:
        return load_settings(config)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def _database(settings: Settings, database: str | None) -> Database:
    db = Database(database or settings.database_url)
    db.upgrade()
    return db


def _split(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


@api_key_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="The client's name (shown on cards and in the "
                                              "audit), e.g. ci-bot.")],
    routes: Annotated[str, typer.Option(help="Routes it may ask on, comma-separated.")],
    agents: Annotated[str, typer.Option(help="Agents it may start (POST /api/v1/runs), "
                                             "comma-separated.")] = "",
    rate_limit: Annotated[int | None, typer.Option(
        help="Requests per minute (default: api.rate_limit).")] = None,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Create an API client; prints its key and webhook secret ONCE."""
    settings = _settings(config)
    if not NAME.fullmatch(name):
        raise _fail("the name may use letters, digits, '.', '_' and '-' (at most 64)")
    route_list, agent_list = _split(routes), _split(agents)
    if not route_list:
        raise _fail("give at least one route with --routes")
    for route in route_list:
        if route not in settings.routes:
            raise _fail(f"route '{route}' is not defined in {settings.source} (known routes: "
                        f"{', '.join(sorted(settings.routes)) or 'none'})")
    for agent in agent_list:
        if agent not in settings.agents:
            raise _fail(f"agent '{agent}' is not defined in {settings.source} (known agents: "
                        f"{', '.join(sorted(settings.agents)) or 'none'})")
    if rate_limit is not None and rate_limit < 1:
        raise _fail("--rate-limit must be at least 1 request per minute")
    try:
        box = box_from_env()
    except SecretKeyError as exc:
        raise _fail(str(exc)) from None
    key, secret = new_api_key(), new_secret()
    db = _database(settings, database)
    try:
        api_clients.create(db, name, hash_key(key), key_prefix(key), box.seal(secret, name),
                           route_list, agent_list, rate_limit or settings.api.rate_limit)
    except api_clients.ClientError as exc:
        raise _fail(str(exc)) from None
    finally:
        db.dispose()
    typer.echo(f"Created API client '{name}' (routes: {', '.join(route_list)}; agents: "
               f"{', '.join(agent_list) or 'none'}).")
    typer.echo("Store both values now; they are not shown again.")
    typer.echo(f"API key:        {key}")
    typer.echo(f"Webhook secret: {secret}")


@api_key_app.command("list")
def list_clients(config: ConfigOpt = None, database: DatabaseOpt = None) -> None:
    """List API clients (never their keys or secrets)."""
    settings = _settings(config)
    db = _database(settings, database)
    try:
        rows = api_clients.all_clients(db)
    finally:
        db.dispose()
    if not rows:
        typer.echo("No API clients yet; create one with 'askhuman api-key create NAME "
                   "--routes ROUTE'.")
        return
    for row in rows:
        state = f"revoked {row.revoked_at:%Y-%m-%d}" if row.revoked_at else "active"
        info = row.info
        typer.echo(f"{info.name}  {row.key_prefix}…  {state}  routes={','.join(info.routes)}"
                   f"  agents={','.join(info.agents) or '-'}  rate={info.rate_limit}/min"
                   f"  created={row.created_at:%Y-%m-%d}")


@api_key_app.command("revoke")
def revoke(name: str, config: ConfigOpt = None, database: DatabaseOpt = None) -> None:
    """Revoke a client's key: every later call with it gets 401; its webhooks stop."""
    settings = _settings(config)
    db = _database(settings, database)
    try:
        changed = api_clients.revoke(db, name)
    except api_clients.ClientError as exc:
        raise _fail(str(exc)) from None
    finally:
        db.dispose()
    typer.echo(f"Revoked '{name}'." if changed else f"'{name}' was already revoked.")


@api_key_app.command("rotate-secret")
def rotate_secret(name: str, config: ConfigOpt = None, database: DatabaseOpt = None) -> None:
    """Replace the webhook signing secret (printed once). For 24 h webhooks carry
    signatures with the old and the new secret, so receivers can switch over."""
    settings = _settings(config)
    try:
        box = box_from_env()
    except SecretKeyError as exc:
        raise _fail(str(exc)) from None
    secret = new_secret()
    db = _database(settings, database)
    try:
        api_clients.rotate_secret(db, name, box.seal(secret, name))
    except api_clients.ClientError as exc:
        raise _fail(str(exc)) from None
    finally:
        db.dispose()
    typer.echo(f"New webhook secret for '{name}' (not shown again): {secret}")


def register(app: typer.Typer) -> None:
    app.add_typer(api_key_app, name="api-key")
