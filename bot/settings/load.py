"""Loading: read the YAML file (or the built-in default), validate it, apply
``ASKHUMAN_*`` environment overrides, and turn pydantic's errors into a ``ConfigError``
that names each bad key and its fix."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.settings.base import KeyPathError
from bot.settings.effective import DEFAULT_DATABASE_URL, Settings
from bot.settings.file import FileSettings

CONFIG_ENV_VAR = "ASKHUMAN_CONFIG"


class EnvSettings(BaseSettings):
    """Environment overrides (``ASKHUMAN_*``)."""

    model_config = SettingsConfigDict(env_prefix="ASKHUMAN_", extra="ignore")

    database_url: str | None = None


CONSOLE_DEMO_USER = "demo-requester"
"""The console user ``askhuman demo`` starts runs as (a starter in the built-in config)."""

BUILTIN_DEFAULT: dict[str, Any] = {
    "agents": {
        "deploy": {
            "model": "scripted:deploy",
            "instructions": "You deploy services after a human approves.",
            "route": "default",
            "starters": {"console": {"users": [CONSOLE_DEMO_USER]}},
        }
    },
    "routes": {"default": {"timeout": "30m", "console": {"enabled": True}}},
}


class ConfigError(ValueError):
    """The config file is invalid; ``str()`` lists every problem with its key path."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: " + "; ".join(problems))


def _location(loc: tuple[int | str, ...]) -> str:
    # pydantic puts validator names (e.g. "function-before[...]") in some paths.
    return ".".join(str(p) for p in loc if not str(p).startswith("function-")) or "(top level)"


def _describe(error: Any) -> str:
    loc = tuple(error["loc"])
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, KeyPathError):
        loc = (*loc, *cause.key.split("."))
    path = _location(loc)
    kind, msg = error["type"], str(error["msg"])
    if kind == "extra_forbidden":
        return f"{path}: unknown key; remove it or check its spelling"
    if kind == "missing":
        return f"{path}: required key is missing"
    msg = msg.removeprefix("Value error, ")
    return f"{path}: {msg}"


def _parse(data: Any, source: str) -> FileSettings:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(source, ["(top level): must be a mapping of keys to values"])
    try:
        return FileSettings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(source, [_describe(e) for e in exc.errors()]) from None


def load_file(path: str | Path) -> FileSettings:
    """Read and validate one YAML file; raise ``ConfigError`` naming each bad key."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(source, [f"cannot read the file: {exc.strerror}"]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(source, [f"not valid YAML: {exc}"]) from None
    return _parse(data, source)


def load_settings(path: str | Path | None = None) -> Settings:
    """The effective settings: ``path`` (or ``$ASKHUMAN_CONFIG``), else the built-in default.

    ``ASKHUMAN_DATABASE_URL`` always wins over the file's ``database_url``.
    """
    path = path or os.environ.get(CONFIG_ENV_VAR) or None
    if path is None:
        parsed, source = _parse(BUILTIN_DEFAULT, "built-in default"), "built-in default"
    else:
        parsed, source = load_file(path), str(path)
    env = EnvSettings()
    url = env.database_url or parsed.database_url or DEFAULT_DATABASE_URL
    return Settings(
        database_url=url, agents=parsed.agents, routes=parsed.routes,
        retention=parsed.retention, source=source, http=parsed.http, api=parsed.api,
        metrics=parsed.metrics, admins=parsed.admins,
        schedules=parsed.schedules, worker=parsed.worker, people=parsed.people,
        rules=parsed.rules,
    )
