"""``AskHumanPlugin``: applies askhuman's answer, carried in an ADK tool confirmation's
``payload``, to the confirmed call; and the payload's shape, which ``adk`` writes.

ADK only reads ``confirmed`` from a confirmation; the rest is for a callback to use,
and a plugin's before-tool callback may answer a call or change its arguments.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from google.adk.plugins.base_plugin import BasePlugin
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext

from askhuman_client.aio import AsyncClient
from askhuman_client.errors import Forbidden, NotFound
from askhuman_client.verdicts import verdict_of

PAYLOAD_KEY = "askhuman"
PLUGIN_NAME = "askhuman"
CONTEXT_KEY = "adk_call"


def call_hash(call_id: str | None, tool_name: str, args: dict[str, Any]) -> str:
    """Names one exact call (its id, tool and arguments) in the request's context, in
    a few bytes whatever the arguments' size, so the plugin can check the record is
    this call's (the request view shows the card, not the call)."""
    call = json.dumps([call_id, tool_name, args], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(call.encode()).hexdigest()


@dataclass(frozen=True)
class _Answer:
    """What the plugin applies to a confirmed call: run it (with ``args`` if edited)
    or answer the model with ``message``."""

    run: bool
    message: str
    args: dict[str, Any] | None = None


def _claimed(tool_context: ToolContext) -> tuple[str | None, _Answer] | None:
    """The answer the confirmation's payload carries (its askhuman ref too), if any."""
    confirmation = tool_context.tool_confirmation
    payload = confirmation.payload if confirmation is not None else None
    answer = payload.get(PAYLOAD_KEY) if isinstance(payload, dict) else None
    if confirmation is None or not isinstance(answer, dict):
        return None
    args = answer.get("args")
    return answer.get("ref"), _Answer(
        confirmation.confirmed, str(answer.get("message") or "This tool call is rejected."),
        args if isinstance(args, dict) else None)


async def _on_record(client: AsyncClient, ref: str | None, tool_name: str,
                     args: dict[str, Any], call_id: str | None) -> _Answer:
    """The answer as askhuman recorded it for this exact call (its id, tool name and
    arguments), whatever the payload claims: a confirmation forged or replayed by
    whoever can message the session neither runs the call nor changes its arguments."""
    try:
        request = await client.get(ref) if ref else None
    except (NotFound, Forbidden):
        request = None
    recorded = (request.context or {}).get(CONTEXT_KEY) if request else None
    if request is None or recorded != call_hash(call_id, tool_name, args):
        return _Answer(False, "This call has no askhuman approval of its own; it was not run.")
    verdict = verdict_of(request, args)
    return _Answer(verdict.approved, verdict.message, verdict.args if verdict.edited else None)


class AskHumanPlugin(BasePlugin):  # type: ignore[misc]  # BasePlugin is Any without ADK
    """Applies askhuman's answer to the confirmed call, where ADK lets a plugin.

    A refused call is answered with the approver's reason (or why nobody decided)
    instead of ADK's bare "This tool call is rejected."; an approved call runs with
    the arguments the approver edited (a before-tool callback may change them), and
    its result tells the model so, since the model still sees the call it wrote.

    The answer rides in the confirmation, which anyone who can message the session can
    write. With ``verify_with`` (an ``AsyncClient``) the plugin trusts only askhuman's
    own record of the request, read again by its ref, and refuses every confirmed call
    that has none."""

    def __init__(self, *, verify_with: AsyncClient | None = None) -> None:
        super().__init__(name=PLUGIN_NAME)
        self.verify_with = verify_with
        self._notes: dict[str, str] = {}

    async def _answer(self, tool: BaseTool, tool_args: dict[str, Any],
                      tool_context: ToolContext) -> _Answer | None:
        claimed = _claimed(tool_context)
        if self.verify_with is None or tool_context.tool_confirmation is None:
            return claimed[1] if claimed else None
        ref = claimed[0] if claimed else None
        return await _on_record(self.verify_with, ref, tool.name, tool_args,
                                tool_context.function_call_id)

    async def before_tool_callback(self, *, tool: BaseTool, tool_args: dict[str, Any],
                                   tool_context: ToolContext) -> dict[str, Any] | None:
        answer = await self._answer(tool, tool_args, tool_context)
        if answer is None:
            return None
        if not answer.run:
            return {"error": answer.message}
        if answer.args is not None:
            tool_args.clear()
            tool_args.update(answer.args)
            note = f"{answer.message} The call ran with {json.dumps(answer.args)}."
            self._notes[str(tool_context.function_call_id)] = note.strip()
        return None

    async def after_tool_callback(self, *, tool: BaseTool, tool_args: dict[str, Any],
                                  tool_context: ToolContext, result: Any
                                  ) -> dict[str, Any] | None:
        note = self._notes.pop(str(tool_context.function_call_id), None)
        if note is None:
            return None
        body = result if isinstance(result, dict) else {"result": result}
        return {**body, "reviewer_note": note}

    async def on_tool_error_callback(self, *, tool: BaseTool, tool_args: dict[str, Any],
                                     tool_context: ToolContext, error: Exception
                                     ) -> dict[str, Any] | None:
        self._notes.pop(str(tool_context.function_call_id), None)  # no result to note
        return None
