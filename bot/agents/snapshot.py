"""Session snapshots: the pydantic-ai message history as plain JSON.

The snapshot is the only state a resume needs, so it must survive a database round
trip and a process restart. We also record which tool call is pending, so a resume
with the wrong ``tool_call_id`` gets a clear error before any model is called.
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue
from pydantic_ai import ModelMessage, ModelMessagesTypeAdapter
from pydantic_core import to_jsonable_python

from bot.agents.base import AgentRuntimeError

SNAPSHOT_SCHEMA_VERSION = 1


def dump_snapshot(
    agent: str, messages: list[ModelMessage], pending_tool_call_id: str | None
) -> dict[str, JsonValue]:
    """Serialize a run's full history to JSON-safe data."""
    return {
        "schema_version": SNAPSHOT_SCHEMA_VERSION,
        "runtime": "pydantic-ai",
        "agent": agent,
        "pending_tool_call_id": pending_tool_call_id,
        "messages": to_jsonable_python(messages),
    }


def prepare_loader() -> None:
    """Build pydantic-ai's message validator now rather than on the first resume.

    ``ModelMessagesTypeAdapter`` defers building its schema to its first use, which
    costs ~50 ms of CPU; the runtime calls this when it is built (at its first run), so
    the first resume of a process does not pay it while a person waits."""
    ModelMessagesTypeAdapter.validate_python([])


def load_messages(snapshot: dict[str, Any], agent: str) -> list[ModelMessage]:
    """Rebuild the message history, refusing snapshots from another agent or format."""
    if snapshot.get("schema_version") != SNAPSHOT_SCHEMA_VERSION:
        raise AgentRuntimeError(
            f"snapshot schema_version must be {SNAPSHOT_SCHEMA_VERSION}, "
            f"got {snapshot.get('schema_version')!r}"
        )
    if snapshot.get("agent") != agent:
        raise AgentRuntimeError(
            f"snapshot belongs to agent {snapshot.get('agent')!r}, not {agent!r}"
        )
    try:
        return ModelMessagesTypeAdapter.validate_python(snapshot.get("messages") or [])
    except ValueError as exc:
        raise AgentRuntimeError(f"snapshot message history is corrupt: {exc}") from exc
