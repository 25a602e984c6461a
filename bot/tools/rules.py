"""``approval: {when: ...}`` rules: CEL expressions (cel-python), never Python ``eval``.

A rule sees exactly three names: ``args`` (the call's arguments, admin ``fixed``
values included), ``agent`` and ``tool``. It is compiled once when the config is
loaded, so a typo is a config error, not a surprise at the first call. At call time
anything but a clear ``false`` (an error, a missing key, a non-boolean) asks for
approval: a broken rule must never let a call run unreviewed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

log = logging.getLogger("askhuman.tools")


@lru_cache(maxsize=1)
def _env() -> Any:
    """cel-python's environment, imported and built on the first rule only: it costs
    about half a second and tens of MB, which a config without rules never needs."""
    import celpy

    return celpy.Environment()


class RuleError(ValueError):
    """The expression does not compile; ``str()`` says where."""


@dataclass(frozen=True)
class Rule:
    """A compiled ``when`` expression."""

    source: str
    _program: Any = field(repr=False, compare=False)

    def needs_approval(self, args: dict[str, Any], agent: str, tool: str) -> bool:
        """True unless the expression evaluates to a boolean ``false``."""
        from celpy import celtypes
        from celpy.adapter import json_to_cel

        activation = {
            "args": json_to_cel(args),
            "agent": celtypes.StringType(agent),
            "tool": celtypes.StringType(tool),
        }
        try:
            value = self._program.evaluate(activation)
        except Exception as exc:  # cel-python raises CELEvalError and friends
            log.warning("approval rule failed; asking for approval",
                        extra={"rule": self.source, "tool": tool, "error": str(exc)[:200]})
            return True
        if isinstance(value, bool):  # celtypes.BoolType subclasses int, not bool
            return value
        if isinstance(value, celtypes.BoolType):
            return bool(value)
        log.warning("approval rule did not give a boolean; asking for approval",
                    extra={"rule": self.source, "tool": tool})
        return True


def evaluate(rule: Rule, args: Any, agent: str, tool: str) -> bool:
    """Evaluate ``rule`` strictly: its boolean, or ``RuleError`` for an error or a
    non-boolean (routing rules: the caller decides what an error means)."""
    from celpy import celtypes
    from celpy.adapter import json_to_cel

    activation = {"args": json_to_cel(args), "agent": celtypes.StringType(agent),
                  "tool": celtypes.StringType(tool)}
    try:
        value = rule._program.evaluate(activation)
    except Exception as exc:  # cel-python raises CELEvalError and friends
        raise RuleError(" ".join(str(exc).split())[:300] or type(exc).__name__) from None
    if isinstance(value, bool | celtypes.BoolType):
        return bool(value)
    raise RuleError(f"gave {type(value).__name__}, not a boolean")


def compile_rule(source: str) -> Rule:
    """Compile ``source``; raise ``RuleError`` with the parser's own pointer on failure."""
    if not source.strip():
        raise RuleError("is empty; write a CEL expression such as \"args.replicas > 3\"")
    try:
        ast = _env().compile(source)
        program = _env().program(ast)
    except Exception as exc:
        text = " ".join(str(exc).split())
        raise RuleError(f"does not compile as CEL: {text}") from None
    return Rule(source, program)


def validated(source: str) -> str:
    """``source`` if it compiles as CEL, else ``ValueError`` with the reason (for
    pydantic validators of ``when`` keys: tool approvals and routing rules)."""
    try:
        compile_rule(source)
    except RuleError as exc:
        raise ValueError(str(exc)) from None
    return source


def scope_holds(rule: Rule, args: Any, call: Any) -> bool:
    """A standing grant's ``grant_scope``: True only when it evaluates to a boolean
    ``true`` for ``args`` (the new call's arguments) and ``call`` (the granted call's);
    an error or a non-boolean is False, so a broken scope never approves a call."""
    from celpy import celtypes
    from celpy.adapter import json_to_cel

    try:
        value = rule._program.evaluate({"args": json_to_cel(args), "call": json_to_cel(call)})
    except Exception as exc:  # cel-python raises CELEvalError and friends
        log.info("grant scope failed; no match",
                 extra={"rule": rule.source, "error": str(exc)[:200]})
        return False
    return isinstance(value, bool | celtypes.BoolType) and bool(value)
