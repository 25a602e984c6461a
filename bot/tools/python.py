"""Python tools: an admin-named function, with its ``fixed`` parameters hidden.

The function is imported from ``module:function`` and wrapped in a coroutine whose
signature lacks the ``fixed`` parameters, so the model-visible schema (built by
pydantic-ai from the signature, type hints and docstring) never shows them, while the
call still validates and converts the model's arguments against the real types.
The admin values are checked against the parameter types once, when the tool is
built, and injected at call time.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_ai import Tool

from bot.tools.config import PythonToolSettings

_UNSUPPORTED = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL,
                inspect.Parameter.VAR_KEYWORD)


class ToolConfigError(ValueError):
    """A tool cannot be built from its config; ``key`` names the config key to fix."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(message)


def resolve_callable(path: str) -> Callable[..., Any]:
    """Import ``module:attr`` (``attr`` may be dotted); ``ToolConfigError`` if it fails."""
    module_name, _, attr = path.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise ToolConfigError("python", f"cannot import module {module_name!r}: "
                              f"{type(exc).__name__}: {exc}") from None
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ToolConfigError("python", f"module {module_name!r} has no attribute "
                                  f"{attr!r}; check the name after the colon")
        target = getattr(target, part)
    if not callable(target):
        raise ToolConfigError("python", f"{path!r} is not a function")
    return typing.cast(Callable[..., Any], target)


@dataclass(frozen=True)
class PythonTool:
    """The pydantic-ai tool plus what the guard needs to know about it."""

    tool: Tool[Any]
    fixed: dict[str, Any]
    """The admin values, converted to the parameter types."""


def build_python_tool(settings: PythonToolSettings) -> PythonTool:
    """The model-facing tool for one ``python:`` entry; ``ToolConfigError`` on bad config."""
    func = resolve_callable(settings.python)
    signature = inspect.signature(func)
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception as exc:
        raise ToolConfigError("python", f"cannot read the type hints of {settings.python!r}: "
                              f"{exc}") from None
    for name, param in signature.parameters.items():
        if param.kind in _UNSUPPORTED:
            raise ToolConfigError("python", f"parameter {name!r} of {settings.python!r} is "
                                  "positional-only or variadic; tools need named parameters")
    fixed = _check_fixed(settings, signature, hints)
    for key in settings.editable:
        if key not in signature.parameters:
            known = ", ".join(n for n in signature.parameters if n not in fixed) or "none"
            raise ToolConfigError(f"editable.{key}", f"{settings.python} has no parameter "
                                  f"{key!r}; its parameters are: {known}")
    kept = [p for n, p in signature.parameters.items() if n not in fixed]
    call = _visible_function(func, fixed, settings.name or func.__name__)
    call.__signature__ = signature.replace(parameters=kept)  # type: ignore[attr-defined]
    call.__annotations__ = {n: hints[n] for n in [p.name for p in kept] if n in hints}
    if "return" in hints:
        call.__annotations__["return"] = hints["return"]
    tool: Tool[Any] = Tool(call, takes_ctx=False, name=settings.name or func.__name__,
                           description=settings.description)
    return PythonTool(tool, fixed)


def _check_fixed(
    settings: PythonToolSettings, signature: inspect.Signature, hints: dict[str, Any]
) -> dict[str, Any]:
    """Every ``fixed`` key must be a parameter and its value must fit the parameter's type."""
    params = list(signature.parameters)
    fixed: dict[str, Any] = {}
    for key, value in settings.fixed.items():
        if key not in signature.parameters:
            known = ", ".join(params) or "none"
            raise ToolConfigError(f"fixed.{key}", f"{settings.python} has no parameter "
                                  f"{key!r}; its parameters are: {known}")
        try:
            fixed[key] = TypeAdapter(hints.get(key, Any)).validate_python(value)
        except ValidationError as exc:
            reason = exc.errors()[0]["msg"]
            raise ToolConfigError(f"fixed.{key}", f"value {value!r} does not fit the "
                                  f"parameter's type: {reason}") from None
    return fixed


def _visible_function(
    func: Callable[..., Any], fixed: dict[str, Any], name: str
) -> Callable[..., Any]:
    """A coroutine that adds the ``fixed`` values and runs ``func``.

    A sync function runs in a worker thread, so a slow one never blocks the event
    loop and the guard's timeout can give up waiting for it (Python cannot stop a
    thread: a hung sync function keeps its thread until it returns).
    """
    is_async = inspect.iscoroutinefunction(func)

    async def call(**kwargs: Any) -> Any:
        merged = {**kwargs, **fixed}
        if is_async:
            return await func(**merged)
        return await asyncio.to_thread(func, **merged)

    call.__name__ = name
    call.__qualname__ = name
    call.__doc__ = func.__doc__
    call.__module__ = getattr(func, "__module__", __name__)
    return call
