"""``askhuman preview ARGS.json --platform slack|feishu|text``.

Lets an operator see exactly what people would get for a given set of model
arguments, without any platform credentials: the args are validated the same
way the tool validates them, then rendered by the pure renderers.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from bot.askhuman.args import validate_and_normalize_args
from bot.askhuman.config import HARD_LIMITS, AskHumanConfig
from bot.askhuman.schema import EXTENSION_FIELD_TYPES, FILE_FIELD_TYPES
from renderers import feishu, slack, text
from renderers.card import RequestCard


class Platform(StrEnum):
    slack = "slack"
    feishu = "feishu"
    text = "text"


def preview_config(allow_files: bool) -> AskHumanConfig:
    """The most permissive config the hard caps allow, so preview shows anything valid."""
    types: list[Any] = ["paragraph", "select", *EXTENSION_FIELD_TYPES]
    if allow_files:
        types += list(FILE_FIELD_TYPES)
    return AskHumanConfig.model_validate(
        {"allowed_field_types": types, "allow_file_fields": allow_files, **HARD_LIMITS}
    )


def render(card: RequestCard, platform: Platform) -> str:
    """The preview output: pretty JSON for chat platforms, plain text otherwise."""
    if platform is Platform.text:
        return text.render_text(card)
    payload = slack.render_request(card) if platform is Platform.slack else feishu.render_card(card)
    return json.dumps(payload, indent=2, ensure_ascii=False)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=2)


def register(app: typer.Typer) -> None:
    """Add the ``preview`` command to the ``askhuman`` CLI."""

    @app.command("preview")
    def preview(
        args_file: Annotated[Path, typer.Argument(help="JSON file with raw ask_human args.")],
        platform: Annotated[Platform, typer.Option(help="Output format.")] = Platform.slack,
        allow_files: Annotated[bool, typer.Option(help="Allow file fields.")] = False,
        agent: Annotated[str, typer.Option(help="Agent name shown on the card.")] = "preview",
    ) -> None:
        """Render ask_human ARGS.json as a Slack, Feishu or plain-text message."""
        try:
            raw = json.loads(args_file.read_text(encoding="utf-8"))
        except OSError as exc:
            raise _fail(f"cannot read {args_file}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise _fail(f"{args_file} is not valid JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise _fail(f"{args_file} must contain a JSON object of ask_human args")
        try:
            args = validate_and_normalize_args(raw, preview_config(allow_files))
        except (ValidationError, ValueError) as exc:
            raise _fail(f"invalid ask_human args in {args_file}: {exc}") from None
        typer.echo(render(RequestCard(ref="preview", args=args, agent_name=agent), platform))
