"""Offline scripted agents (pydantic-ai ``FunctionModel``) for the demo and the tests.

They behave like a careful LLM would: ask with structured fields, read the human's
``AskHumanToolResult`` and react to each status. No tokens, no network.
Select one with the model id ``scripted:<name>``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

Script = Callable[[str, list[dict[str, Any]], str], ModelResponse]
"""(first user prompt, results received so far, tool name) -> next model response."""

_VERSION = re.compile(r"\bv?\d+(?:\.\d+){1,3}\b")


def _first_prompt(messages: list[ModelMessage]) -> str:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ""


def _results(messages: list[ModelMessage], tool_name: str) -> list[dict[str, Any]]:
    """Successful ask_human returns, oldest first (retries are skipped)."""
    found: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if (
                isinstance(part, ToolReturnPart)
                and part.tool_name == tool_name
                and part.outcome == "success"
                and isinstance(part.content, dict)
            ):
                found.append(dict(part.content))
    return found


def _ask(tool_name: str, call_id: str, args: dict[str, Any]) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(tool_name, args, tool_call_id=call_id)])


def _say(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)])


def _deploy_request(version: str) -> dict[str, Any]:
    return {
        "title": f"Deploy {version}?",
        "question": f"Can I deploy {version}? Pick the environment and approve or reject.",
        "markdown": (
            f"## Release {version}\n\n"
            "- 14 commits since the last release\n"
            "- database migrations: **none**\n"
            "- canary error rate: 0.02%\n\n"
            "Rollback plan: redeploy the previous tag."
        ),
        "fields": [
            {
                "type": "select",
                "name": "environment",
                "label": "Environment",
                "required": True,
                "options": [
                    {"value": "staging", "label": "Staging"},
                    {"value": "production", "label": "Production"},
                ],
                "default": "staging",
            },
            {
                "type": "paragraph",
                "name": "comment",
                "label": "Comment",
                "placeholder": "Anything the deployer should know",
            },
        ],
        "actions": [
            {"id": "approve", "label": "Approve", "style": "primary"},
            {"id": "reject", "label": "Reject", "style": "destructive"},
        ],
        "urgency": "high",
    }


def _react_to_deploy(version: str, result: dict[str, Any]) -> str:
    status = result.get("status")
    action = (result.get("action") or {}).get("id")
    values = result.get("values") or {}
    comment = values.get("comment")
    note = f" Reviewer note: {comment}" if comment else ""
    if status == "submitted" and action == "approve":
        env = values.get("environment", "staging")
        return f"Deployed {version} to {env}. Health checks are green.{note}"
    if status == "submitted":
        return f"Deployment of {version} cancelled: the reviewer rejected it.{note}"
    if status == "timeout":
        return (
            f"No approval for {version} arrived in time, so nothing was deployed. "
            "I will ask again in the next release window."
        )
    reason = result.get("message") or status
    return f"Deployment of {version} not started: {reason}"


def deploy_script(prompt: str, results: list[dict[str, Any]], tool_name: str) -> ModelResponse:
    """Ask once for approval, then act on the answer."""
    match = _VERSION.search(prompt)
    version = match.group(0) if match else "the latest build"
    if not results:
        return _ask(tool_name, "deploy_approval_1", _deploy_request(version))
    return _say(_react_to_deploy(version, results[-1]))


def release_script(prompt: str, results: list[dict[str, Any]], tool_name: str) -> ModelResponse:
    """Ask for approval, then (if approved) ask a second question before finishing."""
    match = _VERSION.search(prompt)
    version = match.group(0) if match else "the latest build"
    if not results:
        return _ask(tool_name, "release_approval_1", _deploy_request(version))
    first = results[0]
    approved = (
        first.get("status") == "submitted" and (first.get("action") or {}).get("id") == "approve"
    )
    if not approved:
        return _say(_react_to_deploy(version, first))
    if len(results) == 1:
        return _ask(
            tool_name,
            "release_notes_2",
            {
                "question": f"{version} is live. What should the release notes say?",
                "fields": [
                    {
                        "type": "paragraph",
                        "name": "notes",
                        "label": "Release notes",
                        "required": True,
                    }
                ],
            },
        )
    notes = (results[1].get("values") or {}).get("notes") or "(none)"
    if results[1].get("status") != "submitted":
        notes = "(no notes: " + str(results[1].get("status")) + ")"
    return _say(f"Released {version}. Notes published: {notes}")


def refund_script(prompt: str, results: list[dict[str, Any]], tool_name: str) -> ModelResponse:
    """Ask for a refund amount and reason (number + paragraph fields)."""
    if not results:
        return _ask(
            tool_name,
            "refund_1",
            {
                "title": "Refund request",
                "question": f"Refund requested: {prompt[:200]}. How much should we refund?",
                "fields": [
                    {"type": "number", "name": "amount", "label": "Amount (USD)", "required": True},
                    {"type": "paragraph", "name": "reason", "label": "Reason", "required": True},
                ],
                "actions": [
                    {"id": "refund", "label": "Refund", "style": "primary"},
                    {"id": "deny", "label": "Deny", "style": "destructive"},
                ],
            },
        )
    result = results[-1]
    values = result.get("values") or {}
    if result.get("status") == "submitted" and (result.get("action") or {}).get("id") == "refund":
        return _say(f"Refunded ${values.get('amount')} ({values.get('reason')}).")
    return _say(f"No refund issued ({result.get('status')}).")


_SERVICE = re.compile(r"\brestart\s+(?:the\s+)?([A-Za-z0-9_.-]+)", re.IGNORECASE)


def ops_respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """An agent that acts: it calls ``restart_service`` and reports what really happened.

    The tool sits behind an approval, so the run stops until a person decides; the
    answer (``ToolApproved`` → the tool's real output, ``ToolDenied`` → the reason)
    comes back as the tool's result.
    """
    prompt = _first_prompt(messages)
    match = _SERVICE.search(prompt)
    service = match.group(1) if match else "api"
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, ToolReturnPart) and part.tool_name == "restart_service":
                if part.outcome == "success":
                    return _say(f"Done: {part.content}")
                if part.outcome == "denied":
                    return _say(f"I did not restart {service}: {part.content}")
                return _say(f"Restarting {service} failed: {part.content}")
    args = {"service": service, "reason": prompt[:200]}
    return ModelResponse(parts=[ToolCallPart("restart_service", args,
                                             tool_call_id="restart_1")])


SCRIPTS: dict[str, Script] = {
    "deploy": deploy_script,
    "release": release_script,
    "refund": refund_script,
}
TOOL_SCRIPTS = {"ops": ops_respond}
"""Scripted agents that call admin-configured tools (they read tool results directly)."""


def known_scripts() -> list[str]:
    return sorted([*SCRIPTS, *TOOL_SCRIPTS])


def scripted_model(name: str, tool_name: str = "ask_human") -> FunctionModel:
    """Build the FunctionModel for ``scripted:<name>``; KeyError if unknown.

    The function is async although the scripts never await: pydantic-ai runs a sync
    model function in a worker thread (anyio's ``to_thread``), and that hop cost about
    1 ms of CPU per model request, more than the script itself (``benchmarks/README.md``,
    "Issue 22, part 2: resumes")."""
    if name in TOOL_SCRIPTS:
        tool_script = TOOL_SCRIPTS[name]

        async def act(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            return tool_script(messages, info)

        return FunctionModel(act, model_name=f"scripted:{name}")
    script = SCRIPTS[name]

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return script(_first_prompt(messages), _results(messages, tool_name), tool_name)

    return FunctionModel(respond, model_name=f"scripted:{name}")
