"""The ``askhuman`` command. Each sub-command lives in ``bot/commands/<name>.py``."""

from __future__ import annotations

import typer

from bot.commands import (
    api_key_cmd,
    audit_cmd,
    config_cmd,
    db_cmd,
    demo_cmd,
    mcp_cmd,
    preview_cmd,
    receipt_cmd,
    requests_cmd,
    runs_cmd,
    serve_cmd,
)

app = typer.Typer(
    name="askhuman",
    help="Let AI agents ask people for approvals and structured input in Slack and Feishu.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """askhuman: human approvals for AI agents, in Slack and Feishu/Lark."""


for module in (demo_cmd, serve_cmd, db_cmd, config_cmd, preview_cmd, api_key_cmd, mcp_cmd,
               requests_cmd, runs_cmd, audit_cmd, receipt_cmd):
    module.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
