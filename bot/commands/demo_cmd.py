"""``askhuman demo``: run the scripted deploy agent end to end in the terminal."""

from __future__ import annotations

import asyncio
import json

import typer

from bot.agents import AgentSpec, Outcome, build_runtime
from bot.askhuman.schema import (
    AskHumanSelectedAction,
    AskHumanToolArgs,
    AskHumanToolResult,
    timeout_result,
)


def _show(args: AskHumanToolArgs) -> None:
    typer.echo(f"\n== {args.title or args.question} ==\n{args.question}")
    if args.markdown:
        typer.echo(args.markdown)
    for field in args.fields:
        typer.echo(f"  - {field.label} ({field.type})")
    for i, action in enumerate(args.actions, 1):
        typer.echo(f"  [{i}] {action.label}")


def _answer(args: AskHumanToolArgs, answer: str | None) -> AskHumanToolResult:
    if answer == "timeout":
        return timeout_result()
    if answer is None:
        answer = typer.prompt("Your choice (action id)")
    action = args.action(answer)
    if action is None:
        raise typer.BadParameter(f"choose one of: {', '.join(a.id for a in args.actions)}, timeout")
    return AskHumanToolResult(
        status="submitted", action=AskHumanSelectedAction(id=action.id, label=action.label)
    )


async def _demo(agent: str, prompt: str, answer: str | None) -> Outcome:
    runtime = build_runtime(AgentSpec(name=agent, model=f"scripted:{agent}"))
    outcome = await runtime.run(prompt)
    while outcome.kind == "deferred_call" and outcome.deferred_call is not None:
        args = AskHumanToolArgs.model_validate(outcome.deferred_call.args)
        _show(args)
        result = _answer(args, answer)
        outcome = await runtime.resume(
            outcome.snapshot, {outcome.deferred_call.tool_call_id: result}
        )
    return outcome


def register(app: typer.Typer) -> None:
    @app.command()
    def demo(
        answer: str | None = typer.Option(
            None, help="Answer without asking: an action id or 'timeout'."
        ),
        agent: str = typer.Option("deploy", help="Scripted agent to run."),
        prompt: str = typer.Option("Deploy v2.3.1 to production", help="The user's request."),
    ) -> None:
        """Run the offline deploy-approval agent: it asks, you answer, it finishes."""
        outcome = asyncio.run(_demo(agent, prompt, answer))
        typer.echo(
            "\nAgent: "
            + (outcome.output if isinstance(outcome.output, str) else json.dumps(outcome.output))
        )
