"""The guard around every configured toolset: approval, audit, timeout, output cap.

It is pydantic-ai's ``ApprovalRequiredToolset`` with our policy: ``never`` runs,
``always`` asks, ``{when: ...}`` asks when the CEL rule says so. pydantic-ai has
already validated and converted the model's arguments when ``call_tool`` is reached,
so bad arguments are a ``ModelRetry`` before anyone is asked. An approval request
carries the converted arguments, the tool's description and the admin ``fixed``
values as metadata, for the card.

A call that runs is reported to the run's ``ToolObserver`` before it starts and after
it ends, is cut off after its ``timeout`` (the model gets a ``ToolFailed``), and its
output is capped at ``max_output_chars`` with a visible marker.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ToolFailed
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import ApprovalRequiredToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from bot.tools.approval import format_wait
from bot.tools.binding import jsonable
from bot.tools.config import Approval, WhenRule
from bot.tools.edits import EDIT_NOTE, editable_metadata, with_note
from bot.tools.observer import ToolCall, ToolDeps, ToolDone, ToolObserver
from bot.tools.rules import Rule

TRUNCATED = "\n… [output truncated: {more} more characters]"


@dataclass(frozen=True)
class ToolPolicy:
    """How one tool is guarded (from its config entry)."""

    approval: Approval = "always"
    fixed: dict[str, Any] = field(default_factory=dict)
    editable: tuple[str, ...] = ()
    """Arguments an approver may change ("Edit and approve")."""
    timeout: float = 60.0
    max_output_chars: int = 4000
    route: str | None = None
    rule: Rule | None = None
    grant_scope: str | None = None
    """CEL over ``args`` and ``call``: what a standing grant from this tool's approval
    covers (None: the exact same arguments)."""

    @classmethod
    def of(cls, approval: Approval, **kw: Any) -> ToolPolicy:
        rule = approval.compiled() if isinstance(approval, WhenRule) else None
        return cls(approval=approval, rule=rule, **kw)


def cap_output(result: Any, limit: int) -> Any:
    """``result`` unchanged if short; else its text cut to ``limit`` plus a marker."""
    if isinstance(result, str):
        text = result
    else:
        try:
            text = json.dumps(jsonable(result), ensure_ascii=False)
        except (TypeError, ValueError):
            return result
    if len(text) <= limit:
        return result
    return text[:limit] + TRUNCATED.format(more=len(text) - limit)


@dataclass
class GuardedToolset(ApprovalRequiredToolset[Any]):
    """Wraps one config entry's toolset; ``policy`` maps a tool name to its rules."""

    agent: str = ""
    policy: Callable[[str], ToolPolicy] = field(default=lambda name: ToolPolicy())

    def __post_init__(self) -> None:
        self.approval_required_func = self._needs_approval

    def _needs_approval(
        self, ctx: RunContext[Any], tool_def: ToolDefinition, tool_args: dict[str, Any]
    ) -> bool:
        policy = self.policy(tool_def.name)
        if policy.approval == "never":
            return False
        if policy.rule is None:
            return True
        return policy.rule.needs_approval(jsonable({**tool_args, **policy.fixed}), self.agent,
                                          tool_def.name)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any],
        tool: ToolsetTool[Any],
    ) -> Any:
        policy = self.policy(name)
        if not ctx.tool_call_approved and self.approval_required_func(ctx, tool.tool_def,
                                                                      tool_args):
            raise ApprovalRequired(metadata={
                "args": jsonable(tool_args),
                "fixed": jsonable(policy.fixed),
                "description": tool.tool_def.description or "",
                "route": policy.route,
                "grant_scope": policy.grant_scope,
                **editable_metadata(policy.editable, tool.tool_def.parameters_json_schema),
            })
        return await self._run(name, tool_args, ctx, tool, policy)

    async def _run(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any],
        tool: ToolsetTool[Any], policy: ToolPolicy,
    ) -> Any:
        """Run one call under the observer, the timeout and the output cap; a call an
        approver edited tells the model so in its return (``edit_note``)."""
        meta = ctx.tool_call_metadata if ctx.tool_call_approved else None
        binding = meta.get("binding") if isinstance(meta, dict) else None
        note = meta.get(EDIT_NOTE) if isinstance(meta, dict) else None
        call = ToolCall(name, ctx.tool_call_id or "", jsonable(tool_args), binding)
        observer = ctx.deps.observer if isinstance(ctx.deps, ToolDeps) else None
        if observer is not None:
            await observer.started(call)  # durable before the side effect can happen
        start = time.monotonic()
        try:
            result = await asyncio.wait_for(
                self.wrapped.call_tool(name, tool_args, ctx, tool), policy.timeout)
        except TimeoutError:
            limit = f"{policy.timeout:g}s" if policy.timeout < 60 else format_wait(policy.timeout)
            message = (f"{name} did not finish within {limit} and was stopped; whether it "
                       "took effect is unknown.")
            await _finish(observer, call, start, "timed out")
            raise ToolFailed(message) from None
        except (ModelRetry, ToolFailed) as exc:
            await _finish(observer, call, start, exc.message)
            raise
        except (ApprovalRequired, CallDeferred):
            raise
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            await _finish(observer, call, start, error)
            raise ToolFailed(f"{name} failed: {error}") from None
        await _finish(observer, call, start, None)
        return with_note(cap_output(result, policy.max_output_chars), note)


async def _finish(
    observer: ToolObserver | None, call: ToolCall, start: float, error: str | None
) -> None:
    if observer is not None:
        done = ToolDone(call, ok=error is None, seconds=time.monotonic() - start,
                        error=error)
        await observer.finished(done)
