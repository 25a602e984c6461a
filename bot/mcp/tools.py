"""The MCP tools: ``ask_human`` (Dify v1 args → ``AskHumanToolResult``) and
``request_approval`` (Claude Code's permission-prompt shape).

Both create a request through a ``Backend`` and wait for it: long-polls woken by
the decision itself, with a progress notification between them (clients that
reset their timeout on progress keep waiting), until the request resolves — at the
deadline that is Dify's timeout result. When the MCP client supports form
elicitation, ``ask_human`` also offers the same form to its own user; whichever
answer comes first decides (``api.local_answers``). If the client abandons the call,
the request is cancelled so the card does not wait for nobody.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext

from bot.api.approval_args import REASON_FIELD
from bot.askhuman.args import build_prompt_hint, tool_parameters_schema
from bot.askhuman.schema import AskHumanToolArgs, timeout_result
from bot.mcp.backend import Backend, BackendError

log = logging.getLogger("askhuman.mcp")

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tool_name": {"type": "string", "description": "The tool the agent wants to run."},
        "input": {"type": "object", "description": "The tool's arguments, as they would run."},
        "reason": {"type": "string", "description": "Why the agent wants to run it."},
        "tool_use_id": {"type": "string", "description": "Sent by Claude Code; ignored."},
        "editable": {"type": "array", "items": {"type": "string"},
                     "description": "Arguments the approver may change before approving; "
                                    "updatedInput then holds the edited input."},
    },
    "required": ["tool_name", "input"],
}
APPROVAL_DESCRIPTION = (
    "Ask a person in Slack or Feishu to approve a tool call before it runs. Returns "
    '{"behavior":"allow","updatedInput":{...}} or {"behavior":"deny","message":"..."} '
    "(usable as Claude Code's --permission-prompt-tool).")
DEADLINE_SLACK = dt.timedelta(seconds=30)
"""If the server has not timed a request out this long after its deadline, the tool
answers with the timeout result itself."""

EditableRules = Mapping[str, tuple[str, ...]]
"""Tool name → the arguments approvers may edit in its ``request_approval`` calls."""


@dataclass(frozen=True)
class Caller:
    """Who calls, as a resolver sees it: the backend acting for the caller, the default
    route, and which arguments of which tools approvers may edit when a
    ``request_approval`` call does not say (Claude Code's permission prompt never does)."""

    backend: Backend
    route: str | None
    editable: EditableRules = dataclasses.field(default_factory=dict)


Resolver = Callable[[ServerRequestContext[Any, Any]], Awaitable[Caller]]
"""``ctx → Caller``; raise ``BackendError`` to refuse."""


def parse_editable(specs: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """``["Bash:command", "Write:file_path,content"]`` → ``{"Bash": ("command",), …}``;
    ``ValueError`` names a spec that is not ``TOOL:ARG[,ARG…]``."""
    rules: dict[str, tuple[str, ...]] = {}
    for spec in specs:
        tool, _, names = spec.partition(":")
        args = tuple(n.strip() for n in names.split(",") if n.strip())
        if not tool.strip() or not args:
            raise ValueError(f"editable '{spec}' is not TOOL:ARG[,ARG…] (e.g. Bash:command)")
        rules[tool.strip()] = tuple(dict.fromkeys(rules.get(tool.strip(), ()) + args))
    return rules


@dataclass(frozen=True)
class ToolOptions:
    progress_seconds: float = 15.0
    local_answers: bool = True


def build_server(resolve: Resolver, options: ToolOptions) -> Server[Any]:
    """A low-level MCP server with the two tools, for any transport."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        limits = (await resolve(ctx)).backend.limits
        hint = build_prompt_hint(limits)
        return types.ListToolsResult(tools=[
            types.Tool(name="ask_human", input_schema=tool_parameters_schema(limits),
                       description="\n\n".join(t for t in (limits.effective_description, hint)
                                               if t)),
            types.Tool(name="request_approval", input_schema=APPROVAL_SCHEMA,
                       description=APPROVAL_DESCRIPTION),
        ])

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            caller = await resolve(ctx)
            backend, route = caller.backend, caller.route
            if route is None:
                return _error("This API client has no route to ask on.")
            arguments = dict(params.arguments or {})
            if params.name == "ask_human":
                return await _ask_human(ctx, backend, route, arguments, options)
            if params.name == "request_approval":
                return await _request_approval(ctx, caller, route, arguments, options)
            return _error(f"Unknown tool '{params.name}'.")
        except BackendError as exc:
            return _error(exc.detail)

    return Server("askhuman", version="1", title="askhuman",
                  instructions="Ask people in Slack or Feishu for decisions and input.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


def _result(payload: dict[str, Any]) -> types.CallToolResult:
    text = json.dumps(payload, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(text=text)],
                                structured_content=payload)


def _permission_result(payload: dict[str, Any]) -> types.CallToolResult:
    """Claude Code's permission-prompt answer: one text block holding the JSON, and
    nothing else. Claude Code (2.1) refuses a permission-prompt result that also has
    ``structuredContent`` ("Expected a single text block param…") and runs nothing."""
    text = json.dumps(payload, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(text=text)])


# ---------------------------------------------------------------- ask_human

async def _ask_human(ctx: ServerRequestContext[Any, Any], backend: Backend, route: str,
                     arguments: dict[str, Any], options: ToolOptions) -> types.CallToolResult:
    try:
        with anyio.CancelScope(shield=True):  # once created, we must know its ref
            view = await backend.ask({"route": route, "args": arguments})
    except BackendError as exc:
        return _error(exc.detail)  # Dify's text for bad args, like the tool's ModelRetry
    form = _elicitation_form(view) if options.local_answers and _can_elicit(ctx) else None
    async with _cancel_if_abandoned(backend, str(view["ref"])):
        final = await _wait_or_answer(ctx, backend, view, options, form)
    result = final.get("result") or timeout_result().model_dump(mode="json")
    return _result(result)


async def _wait_or_answer(ctx: ServerRequestContext[Any, Any], backend: Backend,
                          view: dict[str, Any], options: ToolOptions,
                          form: dict[str, Any] | None) -> dict[str, Any]:
    """Wait for the decision; meanwhile offer the form locally when possible."""
    if form is None:
        return await _wait(ctx, backend, view, options)
    outcome: dict[str, Any] = {}
    async with anyio.create_task_group() as group:

        async def wait() -> None:
            outcome.update(await _wait(ctx, backend, view, options))
            group.cancel_scope.cancel()

        group.start_soon(wait)
        group.start_soon(_answer_locally, ctx, backend, view, form)
    return outcome


async def _wait(ctx: ServerRequestContext[Any, Any], backend: Backend, view: dict[str, Any],
                options: ToolOptions) -> dict[str, Any]:
    """Long-poll until resolved, reporting progress between polls."""
    ref = str(view["ref"])
    started = dt.datetime.now(dt.UTC)
    deadline = _parse_time(view.get("deadline"))
    total = (deadline - started).total_seconds() if deadline else None
    while view.get("status") == "pending":
        now = dt.datetime.now(dt.UTC)
        if deadline is not None and now > deadline + DEADLINE_SLACK:
            return {**view, "result": timeout_result().model_dump(mode="json")}
        left = f"; {int((deadline - now).total_seconds())} s left" if deadline else ""
        await ctx.session.report_progress(
            (now - started).total_seconds(), total,
            f"Waiting for a person on route '{view.get('route')}' (request {ref}{left}).")
        view = await backend.get(ref, options.progress_seconds)
    return view


@contextlib.asynccontextmanager
async def _cancel_if_abandoned(backend: Backend, ref: str) -> AsyncIterator[None]:
    """If the client cancels the call (or goes away), withdraw the request: a card must
    not wait for nobody."""
    try:
        yield
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True), anyio.move_on_after(10), \
                contextlib.suppress(BackendError):
            await backend.cancel(ref, "The MCP client stopped waiting.")
        raise


def _parse_time(value: object) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def _can_elicit(ctx: ServerRequestContext[Any, Any]) -> bool:
    caps = ctx.session.client_capabilities
    if caps is None or caps.elicitation is None or not ctx.session.can_send_request:
        return False
    # An empty ``elicitation: {}`` (older clients) means form mode.
    return caps.elicitation.form is not None or caps.elicitation.url is None


def _elicitation_form(view: dict[str, Any]) -> dict[str, Any] | None:
    """The request as a flat elicitation schema (None when a field cannot be one)."""
    args = AskHumanToolArgs.model_validate(view.get("args") or {})
    return elicitation_schema(args)


def elicitation_schema(args: AskHumanToolArgs) -> dict[str, Any] | None:
    actions = [{"const": a.id, "title": a.label} for a in args.actions]
    properties: dict[str, Any] = {"action": {"type": "string", "title": "Answer",
                                             "oneOf": actions}}
    required = ["action"]
    for field in args.fields:
        prop = _field_schema(field)
        if prop is None:
            return None
        properties[field.name] = prop
        if field.required:
            required.append(field.name)
    return {"type": "object", "properties": properties, "required": required}


def _field_schema(field: Any) -> dict[str, Any] | None:
    base: dict[str, Any] = {"title": field.label}
    default = getattr(field, "default", None)
    if field.type in ("paragraph", "date"):
        base["type"] = "string"
        if field.type == "date":
            base["format"] = "date"
        if getattr(field, "placeholder", None):
            base["description"] = field.placeholder
    elif field.type == "select":
        base.update(type="string", oneOf=[{"const": o.value, "title": o.label}
                                          for o in field.options])
    elif field.type == "multi-select":
        base.update(type="array", items={"anyOf": [{"const": o.value, "title": o.label}
                                                   for o in field.options]})
    elif field.type == "number":
        base["type"] = "number"
        if field.min_value is not None:
            base["minimum"] = field.min_value
        if field.max_value is not None:
            base["maximum"] = field.max_value
    elif field.type == "checkbox":
        base["type"] = "boolean"
    else:
        return None  # file fields cannot be elicited
    if default is not None:
        base["default"] = default
    return base


async def _answer_locally(ctx: ServerRequestContext[Any, Any], backend: Backend,
                          view: dict[str, Any], form: dict[str, Any]) -> None:
    """Offer the form to the MCP client's user; an accepted answer decides the request."""
    args = view.get("args") or {}
    message = str(args.get("question") or "An agent asks for your input.")
    try:
        reply = await ctx.session.elicit_form(message, form, related_request_id=ctx.request_id)
    except Exception as exc:  # the client refused elicitation after all: just wait
        log.info("elicitation skipped", extra={"error": type(exc).__name__})
        return
    if reply.action != "accept" or not reply.content:
        return
    values = dict(reply.content)
    action = str(values.pop("action", ""))
    try:
        await backend.answer(str(view["ref"]), action, values)
    except BackendError as exc:
        log.info("local answer refused", extra={"ref": view["ref"], "error": exc.detail})


# ---------------------------------------------------------------- request_approval

async def _request_approval(ctx: ServerRequestContext[Any, Any], caller: Caller, route: str,
                            arguments: dict[str, Any],
                            options: ToolOptions) -> types.CallToolResult:
    """Claude Code calls it as ``{tool_name, input, tool_use_id}``; other properties it
    may add are ignored."""
    backend = caller.backend
    tool_name = arguments.get("tool_name")
    tool_input = arguments.get("input")
    reason = arguments.get("reason")
    if not isinstance(tool_name, str) or not isinstance(tool_input, dict):
        return _error("request_approval needs tool_name (a string) and input (an object).")
    data: dict[str, Any] = {"route": route, "tool_name": tool_name, "args": tool_input}
    editable = arguments.get("editable")
    if not isinstance(editable, list):  # the caller's rules, for the args this call has
        editable = [n for n in caller.editable.get(tool_name, ()) if n in tool_input]
    if editable and all(isinstance(n, str) for n in editable):
        data["editable"] = editable  # approvers may change these ("Edit and approve")
    if isinstance(reason, str) and reason.strip():
        data["reason"] = reason
    try:
        with anyio.CancelScope(shield=True):
            view = await backend.approval(data)
    except BackendError as exc:
        return _error(exc.detail)
    async with _cancel_if_abandoned(backend, str(view["ref"])):
        final = await _wait(ctx, backend, view, options)
    decision = final.get("decision") or {}
    if decision.get("approved"):
        edited = final.get("updated_input")  # an approver's edit, or the input as asked
        return _permission_result({"behavior": "allow", "updatedInput":
                                   edited if isinstance(edited, dict) else tool_input})
    return _permission_result({"behavior": "deny", "message": deny_message(final, tool_name)})


def deny_message(view: dict[str, Any], tool_name: str) -> str:
    """What the agent is told when its call is not approved: who said no and why, or
    that nobody answered in time, or why nobody could."""
    status = view.get("status")
    reason = str((view.get("decision") or {}).get("reason") or "").strip()
    if status == "submitted":
        who = view.get("decided_by")
        who = who if isinstance(who, dict) else {}
        by = f" by {who['name']}" if who.get("name") else ""
        platform = who.get("platform")
        where = f" in {PLATFORM_NAMES.get(str(platform), platform)}" if platform else ""
        values = (view.get("result") or {}).get("values") or {}
        note = str(values.get(REASON_FIELD) or "").strip()  # what the approver typed
        return f"Rejected{by}{where}" + (f": {note}" if note else " (no reason given).")
    if status == "cancelled":
        return f"The approval request for {tool_name} was cancelled: {reason}"
    if status == "unavailable":
        return f"Nobody could be asked to approve {tool_name}: {reason}"
    deadline = _parse_time(view.get("deadline"))
    when = f" ({deadline.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC)" if deadline else ""
    return (f"Nobody approved or rejected this {tool_name} call before the approval "
            f"deadline{when}, so it is not approved.")


PLATFORM_NAMES = {"slack": "Slack", "feishu": "Feishu"}
