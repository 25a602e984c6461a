"""Routing rules as code: which route a new request goes to, and with which overrides.

``rules:`` in the config is a list of ``{when: "<CEL>", route: R, quorum: N, timeout: T}``;
the first rule whose ``when`` is true for the request wins, and with none the request
keeps the route it would have had (the agent's, the tool's, or the API request's). A
rule sees ``agent``, ``tool`` (the tool's name for a tool-call approval, else ``""``)
and ``args`` (the ask_human arguments, or the tool call's arguments). Expressions are
CEL (cel-python, compiled when the config loads), never Python ``eval``. A rule that
errors at evaluation (a missing key, a non-boolean) does not match: its error is shown
by ``askhuman route test``.

The same function decides for live requests and for the dry run, so the dry run and
the engine cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from bot.settings import RouteSettings, Settings
from bot.tools.rules import Rule, RuleError, compile_rule, evaluate


@lru_cache(maxsize=256)
def _compiled(source: str) -> Rule:
    """Compile each expression once per process (the config already compiled it once to
    validate it; a reload brings new sources, old ones just age out)."""
    return compile_rule(source)


@dataclass(frozen=True)
class Verdict:
    """One rule's result for one request: matched, not matched, or an error."""

    index: int
    when: str
    matched: bool
    error: str | None = None


@dataclass(frozen=True)
class Routed:
    """Where a request goes: the route's name, its effective settings (overrides
    applied), the matching rule's index (None: the fallback) and every verdict."""

    name: str
    route: RouteSettings
    rule: int | None
    overrides: dict[str, Any] = field(default_factory=dict)
    verdicts: tuple[Verdict, ...] = ()


def route_request(settings: Settings, *, agent: str, tool: str | None, args: Any,
                  fallback: str, explain: bool = False) -> Routed:
    """Apply ``settings.rules`` to a request about to be raised.

    ``explain`` evaluates every rule (the dry run); otherwise evaluation stops at the
    first match."""
    verdicts: list[Verdict] = []
    chosen: int | None = None
    for index, rule in enumerate(settings.rules):
        if chosen is not None and not explain:
            break
        try:
            matched = evaluate(_compiled(rule.when), args, agent, tool or "")
            verdicts.append(Verdict(index, rule.when, matched))
        except RuleError as exc:
            verdicts.append(Verdict(index, rule.when, False, str(exc)))
            continue
        if matched and chosen is None:
            chosen = index
    if chosen is None:
        return Routed(fallback, settings.routes[fallback], None, {}, tuple(verdicts))
    rule = settings.rules[chosen]
    overrides = rule.overrides()
    effective = settings.routes[rule.route].model_copy(update=overrides)
    return Routed(rule.route, effective, chosen, overrides, tuple(verdicts))
