"""The one small interface every agent runtime implements.

A run either finishes with an ``output`` or stops on deferred calls: at most one
``deferred_call`` (the ask_human request) and any number of tool ``approvals``
(calls that may run only once a person approved them). Either way it returns a
JSON-serializable ``snapshot`` that is all a later ``resume`` needs, so the engine
can store it and resume in another process, hours later.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from pydantic import JsonValue

from bot.askhuman.schema import AskHumanToolResult, DeferredToolCallPayload
from bot.tools.approval import ToolApprovalRequest


class AgentRuntimeError(Exception):
    """A run or resume that cannot proceed; the message is shown to people as is."""


class UnknownModelError(AgentRuntimeError):
    """The agent spec names a model id pydantic-ai (or askhuman) does not know."""


class ResumeMismatchError(AgentRuntimeError):
    """The results do not answer the call the snapshot is waiting for."""


class ToolBindingError(ResumeMismatchError):
    """A pending tool call is not the call that was approved (another tool, other
    arguments or other ``fixed`` values): nothing runs."""

    def __init__(self, tool_call_id: str, tool: str, approved: str, pending: str) -> None:
        self.tool_call_id = tool_call_id
        self.tool = tool
        self.approved = approved
        self.pending = pending
        super().__init__(
            f"the pending call {tool_call_id!r} to {tool!r} is not the call that was approved "
            f"(approved {approved[:12] or 'nothing'}, pending {pending[:12] or 'nothing'}); "
            "nothing was run"
        )


@dataclass(frozen=True)
class Outcome:
    """The end of one run: ``output``, or the deferred calls (``deferred_call`` and/or
    ``approvals``) it waits for.

    ``output`` may legitimately be None (a null final answer), so test ``kind``.
    """

    kind: Literal["output", "deferred_call"]
    snapshot: dict[str, JsonValue]
    output: JsonValue = None
    deferred_call: DeferredToolCallPayload | None = None
    usage: dict[str, JsonValue] = field(default_factory=dict)
    approvals: tuple[ToolApprovalRequest, ...] = ()

    @classmethod
    def finished(cls, output: JsonValue, snapshot: dict[str, JsonValue]) -> Outcome:
        return cls(kind="output", snapshot=snapshot, output=output)

    @classmethod
    def asking(cls, call: DeferredToolCallPayload, snapshot: dict[str, JsonValue]) -> Outcome:
        return cls(kind="deferred_call", snapshot=snapshot, deferred_call=call)

    @classmethod
    def deferring(
        cls, call: DeferredToolCallPayload | None, approvals: tuple[ToolApprovalRequest, ...],
        snapshot: dict[str, JsonValue],
    ) -> Outcome:
        """Stopped on tool approvals (and maybe one ask_human call in the same step)."""
        return cls(kind="deferred_call", snapshot=snapshot, deferred_call=call,
                   approvals=approvals)


class AgentRuntime(Protocol):
    """Runs one configured agent. Implementations must be safe to call concurrently."""

    name: str

    async def run(self, prompt: str) -> Outcome:
        """Start a fresh run from a user prompt."""
        ...

    async def resume(
        self, snapshot: dict[str, JsonValue], results: dict[str, AskHumanToolResult]
    ) -> Outcome:
        """Continue a run that stopped on a deferred call; ``results`` is keyed by tool_call_id."""
        ...
