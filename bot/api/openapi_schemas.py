"""The component schemas of the API document: request bodies from their pydantic
models, responses as the views build them.

Request schemas are ``model_json_schema()`` of the very models ``parse`` validates
with (``bot.api.bodies``), plus the ask_human args under the caller's guardrails
(``bot.api.args_schema``); the client's routes and agents become enums when the
document is made for one client. Response schemas list every key the views always
send as required, so a response missing one is caught by the live API test.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.api.args_schema import args_schema
from bot.api.bodies import BODIES, AskBody
from bot.askhuman.config import AskHumanConfig
from bot.askhuman.schema import AskHumanToolResult

REF = "#/components/schemas/{model}"
REQUEST_STATUSES = ["pending", "submitted", "timeout", "cancelled", "unavailable"]
RUN_STATUSES = ["queued", "running", "waiting", "succeeded", "failed"]


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


_STRING = {"type": "string"}
_STAMP = {"type": "string", "format": "date-time"}
_LINK = {"type": "string", "description": "A path on this server."}


def _object(properties: dict[str, Any], *, optional: Sequence[str] = (),
            description: str = "") -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties,
                              "required": [k for k in properties if k not in optional]}
    if description:
        schema["description"] = description
    return schema


def body_schemas(limits: AskHumanConfig, routes: Sequence[str] | None,
                 agents: Sequence[str] | None) -> dict[str, Any]:
    """Every request body, plus the ask_human args schema and its definitions."""
    args, defs = args_schema(limits)
    schemas: dict[str, Any] = {**defs, "AskHumanToolArgs": args}
    for name, model in BODIES.items():
        schema = model.model_json_schema(ref_template=REF)
        schemas.update(schema.pop("$defs", {}))
        props = schema["properties"]
        if model is AskBody:
            props["args"] = {**ref("AskHumanToolArgs"), "description": props["args"].get(
                "description", "")}
        if routes and "route" in props:
            _enum(props["route"], routes)
        if agents and "agent" in props:
            _enum(props["agent"], agents)
        schemas[name] = schema
    return schemas


def _enum(prop: dict[str, Any], values: Sequence[str]) -> None:
    """Narrow a (maybe nullable) string to ``values``: this client's routes or agents."""
    target = next((s for s in prop.get("anyOf", []) if s.get("type") == "string"), prop)
    target["enum"] = sorted(values)


def response_schemas() -> dict[str, Any]:
    result = AskHumanToolResult.model_json_schema(ref_template=REF)
    schemas: dict[str, Any] = dict(result.pop("$defs", {}))
    schemas["AskHumanToolResult"] = result
    decided_by = _nullable({"type": "object", "additionalProperties": _nullable(_STRING)})
    request = _object({
        "ref": _STRING, "kind": {"enum": ["ask", "approval"]},
        "status": {"enum": REQUEST_STATUSES}, "route": _STRING, "agent_name": _STRING,
        "args": {"type": "object", "description": "The ask_human args, normalized."},
        "created_at": _STAMP, "deadline": _nullable(_STAMP), "decided_at": _nullable(_STAMP),
        "decided_by": decided_by, "result": _nullable(ref("AskHumanToolResult")),
        "context": _nullable({"type": "object"}), "idempotency_key": _nullable(_STRING),
        "tool_name": _nullable(_STRING),
        "decision": _nullable(_object({"approved": {"type": "boolean"}, "reason": _STRING},
                                      description="Approvals, once decided.")),
        "updated_input": {"type": "object", "description": (
            "Approved approvals: the input to run, as an approver edited it (\"Edit and "
            "approve\", for the arguments the request made editable) or as asked.")},
        "links": _object({"self": _LINK, "wait": _LINK, "cancel": _LINK})},
        optional=("tool_name", "decision", "updated_input"))
    run_request = _object({"ref": _STRING, "status": {"enum": REQUEST_STATUSES},
                           "links": _object({"self": _LINK})})
    schemas.update({
        "Problem": _object({
            "type": {"type": "string", "description": "urn:askhuman:problem:<kind>"},
            "title": _STRING, "status": {"type": "integer"}, "detail": _STRING,
            "instance": _STRING,
            "errors": {"type": "array", "items": _object({"key": _STRING,
                                                          "message": _STRING})}},
            optional=("instance", "errors"), description="RFC 9457 problem details; some "
            "kinds add members (errors, max_bytes, status_now)."),
        "Request": request,
        "RequestList": _object({"items": {"type": "array", "items": ref("Request")},
                                "next_cursor": _nullable(_STRING),
                                "links": _object({"next": _LINK})}, optional=("links",)),
        "Run": _object({
            "id": _STRING, "agent": _STRING, "status": {"enum": RUN_STATUSES}, "output": {},
            "error": _nullable(_STRING), "created_at": _STAMP, "updated_at": _STAMP,
            "requests": {"type": "array", "items": run_request},
            "links": _object({"self": _LINK})}),
        "Me": _object({"name": _STRING, "routes": {"type": "array", "items": _STRING},
                       "agents": {"type": "array", "items": _STRING},
                       "rate_limit": {"type": "integer"},
                       "ask_human": {"type": "object", "description": "This client's "
                                     "ask_human guardrails."}}),
        "WebhookEvent": _object({"type": {"const": "request.resolved"},
                                 "timestamp": _STRING, "data": ref("Request")},
                                description="Standard Webhooks body; headers webhook-id "
                                "(msg_<ref>), webhook-timestamp, webhook-signature."),
    })
    return schemas
