"""``fixed`` arguments for MCP tools: hidden from the model, sent on every call.

As for Python tools, an admin may pin some arguments of an MCP tool
(``fixed: {scale: {cluster: prod-eu}}``). The model never sees them (they are taken
out of the tool's JSON Schema here) and cannot set them (``schema_check`` turns an
attempt into a retry); ``ManagedMcpServer.call_tool`` adds them to every call, and
the approval card and binding hash include them (``bot.tools.build``).

A key the server's tool does not have, or a value its schema refuses, stops the run
with an error naming the key: the admin's pin would otherwise be silently lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pydantic_ai.exceptions import UserError
from pydantic_ai.toolsets.abstract import ToolsetTool


class FixedArgumentError(UserError):
    """A ``fixed`` key or value does not fit the MCP tool; the message names the key."""


def fixed_problems(schema: Mapping[str, Any], fixed: Mapping[str, Any], key: str) -> list[str]:
    """Every ``fixed`` key the schema lacks or whose value the schema refuses."""
    from jsonschema.validators import validator_for

    properties = schema.get("properties") or {}
    problems: list[str] = []
    for name, value in fixed.items():
        if name not in properties:
            known = ", ".join(properties) or "none"
            problems.append(f"{key}.{name}: the tool has no parameter {name!r}; its "
                            f"parameters are: {known}")
            continue
        prop = {**properties[name], "$defs": schema.get("$defs", {})}
        error = next(iter(validator_for(prop)(prop).iter_errors(value)), None)
        if error is not None:
            problems.append(f"{key}.{name}: value {value!r} does not fit the parameter: "
                            f"{error.message}")
    return problems


def hide_fixed(tool: ToolsetTool[Any], fixed: Mapping[str, Any], key: str) -> ToolsetTool[Any]:
    """``tool`` with the ``fixed`` parameters taken out of the schema the model sees."""
    if not fixed:
        return tool
    schema = dict(tool.tool_def.parameters_json_schema or {})
    problems = fixed_problems(schema, fixed, key)
    if problems:
        raise FixedArgumentError("; ".join(problems))
    schema["properties"] = {k: v for k, v in (schema.get("properties") or {}).items()
                            if k not in fixed}
    if "required" in schema:
        schema["required"] = [k for k in schema["required"] if k not in fixed]
    return replace(tool, tool_def=replace(tool.tool_def, parameters_json_schema=schema))
