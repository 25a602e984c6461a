"""``askhuman route test ARGS.json --agent deploy [--tool NAME]``: a dry run of ``rules:``.

Prints each rule's verdict, the rule that matches (first match wins) and the policy
the request would get: route, quorum, timeout, reminders, escalation chain, timeout
notice and approvers. It runs the engine's own routing function on the config
(nothing is sent, no database is opened), so admins can put it in CI: exit 0 on
success, 2 on a config error or unreadable input, and with ``--expect-route R`` 1
when the request would go elsewhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

route_app = typer.Typer(help="Routing rules: which route a request goes to (dry run).",
                        no_args_is_help=True)


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def _policy(routed: Any) -> dict[str, Any]:
    """The effective policy of a routed request, as plain data."""
    from bot.settings import describe_span, format_duration

    route = routed.route
    return {
        "route": routed.name,
        "rule": routed.rule,
        "overrides": routed.overrides,
        "quorum": route.quorum,
        "timeout": format_duration(route.timeout),
        "allow_self_approval": route.allow_self_approval,
        "veto": route.veto,
        "require": [g.model_dump(mode="json", exclude_none=True) for g in route.require],
        "require_reason": list(route.require_reason),
        "reminder": describe_span(route.reminder) if route.reminder is not None else None,
        "max_reminders": route.max_reminders,
        "escalation": [{"after": describe_span(s.after), "route": s.route}
                       for s in route.escalation or []],
        "on_timeout": route.on_timeout.notify if route.on_timeout else None,
        "approvers": {p: route.approvers_for(p).model_dump()
                      for p in route.platforms()},
    }


def _words(result: dict[str, Any]) -> str:
    lines = []
    for verdict in result["rules"]:
        state = "error: " + verdict["error"] if verdict["error"] else \
            ("match" if verdict["matched"] else "no match")
        lines.append(f"rules[{verdict['index']}] {state}: {verdict['when']}")
    policy = result["policy"]
    rule = policy["rule"]
    lines.append(f"=> route {policy['route']} ("
                 + (f"rules[{rule}] matched" if rule is not None
                    else "no rule matched: the default route") + ")")
    for key in ("quorum", "timeout", "allow_self_approval", "reminder", "max_reminders",
                "escalation", "on_timeout", "approvers"):
        lines.append(f"   {key}: {json.dumps(policy[key], ensure_ascii=False)}")
    return "\n".join(lines)


def _tool_route(agent: Any, tool: str | None) -> str | None:
    """The ``route:`` of the Python tool the model knows as ``tool`` (its ``name``, else
    the function's name). MCP tools are named by their server, so they are not known
    offline: their approvals fall back to the agent's route here."""
    if tool is None:
        return None
    for spec in agent.tools:
        python = getattr(spec, "python", None)
        if python is None:
            continue
        if tool == (getattr(spec, "name", None) or python.rpartition(":")[2]):
            return getattr(spec, "route", None)
    return None


@route_app.command("test")
def test(
    args_file: Annotated[Path, typer.Argument(help="JSON: the ask_human arguments, or the "
                                                   "tool call's arguments with --tool.")],
    agent: Annotated[str, typer.Option(help="The agent raising the request.")],
    tool: Annotated[str | None, typer.Option(help="A tool-call approval for this tool.")]
    = None,
    config: Annotated[Path | None, typer.Option(help="Config file (same as `serve`).")] = None,
    expect_route: Annotated[str | None, typer.Option(
        help="Exit 1 unless the request would go to this route (for CI).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """Which rule matches ARGS_FILE for --agent (and --tool), and the resulting policy."""
    from bot.commands.config_cmd import config_invalid
    from bot.engine.routing import route_request
    from bot.settings import ConfigError, load_settings

    try:
        settings = load_settings(config)
    except ConfigError as exc:
        raise config_invalid(exc, 2) from None
    try:
        args = json.loads(args_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _fail(f"cannot read {args_file} as JSON: {exc}") from None
    found = settings.agent(agent)
    if found is None:
        known = ", ".join(sorted(settings.agents)) or "none defined"
        raise _fail(f"agent '{agent}' is not defined in {settings.source} (known agents: "
                    f"{known})")
    fallback = _tool_route(found, tool) or found.route
    routed = route_request(settings, agent=agent, tool=tool, args=args, fallback=fallback,
                           explain=True)
    result = {"rules": [{"index": v.index, "when": v.when, "matched": v.matched,
                         "error": v.error} for v in routed.verdicts],
              "policy": _policy(routed)}
    typer.echo(json.dumps(result, indent=2, ensure_ascii=False) if as_json
               else _words(result))
    if expect_route is not None and routed.name != expect_route:
        raise _fail(f"expected route '{expect_route}', got '{routed.name}'", code=1)


def register(app: typer.Typer) -> None:
    app.add_typer(route_app, name="route")
