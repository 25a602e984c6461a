"""``askhuman demo``: a scripted agent end to end through the engine, storage and console.

Nothing here needs a token or the network: the agent is an offline scripted model,
the database a temporary SQLite file (or ``--database``), and the platform the
terminal. ``--answer approve|reject|timeout`` answers without asking.

``--agent ops`` is an agent that acts: it calls the real Python tool
``bot.tools.demo:restart_service`` behind an approval. Approve and the tool runs (it
appends a line to a journal file, printed at the end); reject or let it time out and
it never runs, and the agent says so.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import JsonValue

from bot.askhuman.config import AskHumanConfig
from bot.askhuman.schema import AskHumanToolArgs
from bot.engine import Engine, EngineError, Identity, Origin
from bot.platforms.console import ConsoleAdapter, ConsoleDirectory, console_identity
from bot.settings import CONSOLE_DEMO_USER, AgentSettings, Settings, Starters, load_settings
from bot.tools.demo import JOURNAL_ENV
from renderers.card import RequestCard
from storage import Database

DEMO_FIELD_TYPES: list[Any] = ["paragraph", "select", "multi-select", "number", "checkbox", "date"]
STARTER = Identity("console", CONSOLE_DEMO_USER, "demo requester")


class DemoClock:
    """Real time plus an offset, so ``--answer timeout`` can jump past the deadline."""

    def __init__(self) -> None:
        self.offset = dt.timedelta()

    def __call__(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC) + self.offset


DEMO_TOOLS: dict[str, list[dict[str, Any]]] = {
    "ops": [{"python": "bot.tools.demo:restart_service", "approval": "always",
             "fixed": {"cluster": "demo-cluster"}}],
}
"""Scripted agents that act, and the tools the demo gives them."""


def _with_agent(settings: Settings, agent: str) -> Settings:
    """Let ``--agent release`` etc. run the matching scripted model on the first route."""
    if agent in settings.agents or not settings.routes:
        return settings
    extra = AgentSettings.model_validate({
        "model": f"scripted:{agent}", "route": next(iter(settings.routes)),
        "ask_human": AskHumanConfig(allowed_field_types=DEMO_FIELD_TYPES),
        "tools": DEMO_TOOLS.get(agent, []),
        "starters": Starters.model_validate({"console": {"users": [CONSOLE_DEMO_USER]}}),
    })
    return settings.model_copy(update={"agents": {**settings.agents, agent: extra}})


def _show_journal(settings: Settings, agent: str) -> None:
    """The demo tool's side effect, for everyone to check (agents with tools only)."""
    if agent not in settings.agents or not settings.agents[agent].tools:
        return
    from bot.tools.demo import journal_path

    path = journal_path()
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    typer.echo(f"Journal {path}: {len(lines)} line(s)" + (":" if lines else
               " (the tool never ran)"))
    for line in lines:
        typer.echo(f"  {line}")


def _auto_values(args: AskHumanToolArgs) -> dict[str, JsonValue]:
    """Defaults, plus a plausible value for each required field without one."""
    values: dict[str, JsonValue] = {}
    for field in args.fields:
        default = getattr(field, "default", None)
        if default is not None:
            values[field.name] = default
        elif field.required:
            options = getattr(field, "options", None) or []
            guess: dict[str, JsonValue] = {
                "paragraph": "(answered by askhuman demo)",
                "number": getattr(field, "min_value", None) or 1,
                "checkbox": True,
                "date": dt.date.today().isoformat(),
                "select": options[0].value if options else None,
                "multi-select": [options[0].value] if options else [],
            }
            values[field.name] = guess.get(field.type)
    return values


def _ask_values(args: AskHumanToolArgs) -> dict[str, JsonValue]:
    values: dict[str, JsonValue] = {}
    for field in args.fields:
        default = getattr(field, "default", None)
        shown = "" if default is None else str(default)
        text = typer.prompt(f"{field.label}", default=shown, show_default=bool(shown))
        if text != "":
            values[field.name] = [v.strip() for v in text.split(",")] if (
                field.type == "multi-select") else text
    return values


async def _answer(engine: Engine, clock: DemoClock, card: RequestCard, answer: str | None,
                  responder: Identity) -> bool:
    """Answer one card; returns False when a non-interactive answer was refused."""
    if answer == "timeout":
        if card.deadline is not None:
            clock.offset += card.deadline - clock() + dt.timedelta(seconds=1)
        await engine.expire_due()
        return True
    while True:
        if answer is None:
            values = _ask_values(card.args)
            ids = ", ".join(a.id for a in card.args.actions)
            action = typer.prompt(f"Action ({ids})")
        else:
            values, action = _auto_values(card.args), answer
            if card.args.action(answer) is None and len(card.args.actions) == 1:
                action = card.args.actions[0].id  # e.g. a follow-up with only "Submit"
        result = await engine.respond(card.ref, responder, action, values)
        typer.echo(result.message, err=True)
        if result.ok or result.outcome == "already_decided":
            return True
        if answer is not None:
            return False


async def _demo(settings: Settings, agent: str, prompt: str, answer: str | None,
                database: str) -> int:
    db = Database(database)
    db.upgrade()
    clock = DemoClock()
    engine = Engine(db, settings, clock=clock)
    console = ConsoleAdapter()
    engine.register_adapter(console, ConsoleDirectory())
    responder = console_identity("you")
    try:
        try:
            run_id = await engine.start_run(agent, prompt, STARTER, Origin("console"))
        except EngineError as exc:  # e.g. a --config whose agent has no console starters
            typer.echo(f"error: {exc}", err=True)
            return 1
        answered: set[str] = set()
        while pending := [c for c in console.delivered if c.ref not in answered]:
            card = pending[0]
            answered.add(card.ref)
            if not await _answer(engine, clock, card, answer, responder):
                return 1
            await engine.run_worker_once()
        status = await asyncio.to_thread(_run_status, db, run_id)
        _show_journal(settings, agent)
        return 0 if status == "succeeded" else 1
    finally:
        await engine.close_runtimes()
        db.dispose()


def _run_status(db: Database, run_id: str) -> str | None:
    from storage import Run

    with db.transaction() as session:
        run = session.get(Run, run_id)
        return run.status if run else None


def register(app: typer.Typer) -> None:
    @app.command()
    def demo(
        answer: Annotated[str | None, typer.Option(
            help="Answer without asking: an action id (approve, reject…) or 'timeout'.")] = None,
        agent: Annotated[str, typer.Option(
            help="Agent to run (scripted ones need no setup; 'ops' calls a tool).")] = "deploy",
        prompt: Annotated[str, typer.Option(
            help="The user's request.")] = "Deploy v2.3.1 to production",
        config: Annotated[Path | None, typer.Option(
            help="Config file (default: built-in).")] = None,
        database: Annotated[str | None, typer.Option(
            help="Database URL (default: a temporary SQLite file).")] = None,
    ) -> None:
        """Run an offline agent: it asks, you answer in the terminal, it finishes."""
        logging.basicConfig(level=logging.WARNING)
        settings = _with_agent(load_settings(config), agent)
        with tempfile.TemporaryDirectory(prefix="askhuman-demo-") as tmp:
            url = database or f"sqlite:///{Path(tmp) / 'demo.db'}"
            own_journal = JOURNAL_ENV not in os.environ  # the tool's journal lives in tmp
            if own_journal:
                os.environ[JOURNAL_ENV] = str(Path(tmp) / "journal.txt")
            try:
                code = asyncio.run(_demo(settings, agent, prompt, answer, url))
            finally:
                if own_journal:
                    os.environ.pop(JOURNAL_ENV, None)
        raise typer.Exit(code)
