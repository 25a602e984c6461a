"""The ``askhuman`` command. Each sub-command lives in ``bot/commands/<name>.py``.

Sub-commands are imported only when they run (or show their own ``--help``): the
engine, SQLAlchemy, pydantic-ai and the platform SDKs take seconds to import, and
``askhuman --help`` must not pay for them. ``COMMANDS`` lists each command's module
and the one-line help the top-level ``--help`` shows.
"""

from __future__ import annotations

import importlib
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("demo_cmd", "Run an offline agent: it asks, you answer in the terminal, it "
                         "finishes."),
    "serve": ("serve_cmd", "Run the bot: Slack (Socket Mode if SLACK_APP_TOKEN is set, else "
                           "HTTP /slack/events), other configured platforms, and the "
                           "resume/timeout worker."),
    "worker": ("serve_cmd", "Run the background work only (outbox, resumes, stored clicks, "
                            "timeouts, reminders, schedules, webhooks) beside `askhuman serve "
                            "--no-background` processes on the same database; serves only "
                            "/healthz and /readyz."),
    "preview": ("preview_cmd", "Render ask_human ARGS.json as a Slack, Feishu or plain-text "
                               "message."),
    "mcp": ("mcp_cmd", "MCP server over stdio (tools ask_human, request_approval), acting for "
                       "the API client whose key is in ASKHUMAN_API_KEY."),
    "db": ("db_cmd", "Database schema (Alembic migrations)."),
    "config": ("config_cmd", "Admin configuration."),
    "api-key": ("api_key_cmd", "API clients: keys for /api/v1, /mcp and askhuman mcp."),
    "requests": ("requests_cmd", "Requests waiting for people (and decided ones)."),
    "runs": ("runs_cmd", "Agent runs."),
    "audit": ("audit_cmd", "The audit log."),
    "receipt": ("receipt_cmd", "Signed receipts of decisions."),
    "grants": ("grants_cmd", "Standing grants: list, show and revoke."),
    "route": ("route_cmd", "Routing rules: which route a request goes to (dry run)."),
    "delegate": ("delegate_cmd", "Delegations (out of office): who answers for whom, until "
                                 "when."),
}
"""name → (module in ``bot.commands`` whose ``register(app)`` adds it, short help)."""


def load_command(name: str) -> Any:
    """Import the command's module and build its click command."""
    module = importlib.import_module(f"bot.commands.{COMMANDS[name][0]}")
    sub = typer.Typer(add_completion=False)

    @sub.callback()
    def _group() -> None:  # a callback keeps ``sub`` a group even with one command
        pass

    module.register(sub)
    group = typer.main.get_command(sub)
    return group.commands[name]  # type: ignore[attr-defined]


class _LazyCommand(TyperCommand):
    """Stands in for a command in listings; running it builds the real one."""

    def __init__(self, name: str) -> None:
        super().__init__(name, short_help=COMMANDS[name][1], help=COMMANDS[name][1],
                         add_help_option=False)
        self._real: Any = None

    def real(self) -> Any:
        if self._real is None:
            self._real = load_command(str(self.name))
        return self._real

    def make_context(self, info_name: Any, args: Any, parent: Any = None, **extra: Any) -> Any:
        return self.real().make_context(info_name, args, parent=parent, **extra)


class LazyGroup(TyperGroup):
    """The top-level group: lists ``COMMANDS`` without importing them."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        return _LazyCommand(cmd_name) if cmd_name in COMMANDS else None


app = typer.Typer(
    name="askhuman",
    help="Let AI agents ask people for approvals and structured input in Slack and Feishu.",
    no_args_is_help=True,
    add_completion=False,
    cls=LazyGroup,
)


@app.callback()
def _root() -> None:
    """askhuman: human approvals for AI agents, in Slack and Feishu/Lark."""


def main() -> None:
    app()


if __name__ == "__main__":
    main()
