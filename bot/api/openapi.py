"""The OpenAPI 3.1 document served at ``/api/v1/openapi.json``.

Schemas of the contract (``AskHumanToolArgs``, ``AskHumanToolResult``) come straight
from the pydantic models, so the document cannot drift from what is validated.
"""

from __future__ import annotations

import functools
from typing import Any

from bot.askhuman.schema import AskHumanToolArgs, AskHumanToolResult

REF = "#/components/schemas/{model}"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _problems(*codes: int) -> dict[str, Any]:
    reasons = {400: "Malformed JSON or query", 401: "Missing, unknown or revoked key",
               403: "Route or agent not allowed for this client", 404: "Not found (or not yours)",
               409: "Conflict (idempotency key reused, already resolved)",
               413: "Body larger than the cap", 422: "Invalid body or ask_human args (Dify's "
               "error text in detail)", 429: "Rate limit exceeded (see Retry-After)"}
    return {str(code): {"description": reasons[code], "content": {
        "application/problem+json": {"schema": _ref("Problem")}}} for code in codes}


def _components() -> dict[str, Any]:
    args = AskHumanToolArgs.model_json_schema(ref_template=REF)
    result = AskHumanToolResult.model_json_schema(ref_template=REF)
    schemas: dict[str, Any] = {}
    for source in (args, result):
        schemas.update(source.pop("$defs", {}))
    schemas["AskHumanToolArgs"] = args
    schemas["AskHumanToolResult"] = result
    nullable_str = {"type": ["string", "null"]}
    common = {
        "route": {"type": "string", "description": "One of the client's routes."},
        "agent_name": {"type": "string", "pattern": r"^[A-Za-z0-9_.\-]{1,64}$",
                       "description": "Shown on the card after the client's name."},
        "context": {"type": "object", "description": "Yours: stored and echoed back."},
        "idempotency_key": {"type": "string", "maxLength": 200,
                            "description": "Same key → same request, never a second card."},
        "callback_url": {"type": "string", "format": "uri", "description":
                         "Receives the signed webhook (host must be on api.callback_hosts)."},
    }
    schemas.update({
        "Problem": {"type": "object", "description": "RFC 9457 problem details.",
                    "properties": {"type": {"type": "string"}, "title": {"type": "string"},
                                   "status": {"type": "integer"}, "detail": {"type": "string"},
                                   "instance": {"type": "string"}}},
        "CreateRequest": {"type": "object", "additionalProperties": False,
                          "required": ["route", "args"],
                          "properties": {**common, "args": _ref("AskHumanToolArgs")}},
        "CreateApproval": {"type": "object", "additionalProperties": False,
                           "required": ["route", "tool_name"],
                           "properties": {**common, "tool_name": {"type": "string"},
                                          "args": {"type": "object"},
                                          "reason": {"type": "string"}}},
        "Request": {"type": "object", "properties": {
            "ref": {"type": "string"}, "kind": {"enum": ["ask", "approval"]},
            "status": {"enum": ["pending", "submitted", "timeout", "cancelled",
                                "unavailable"]},
            "route": {"type": "string"}, "agent_name": {"type": "string"},
            "created_at": {"type": "string", "format": "date-time"},
            "deadline": {"type": ["string", "null"], "format": "date-time"},
            "decided_at": {"type": ["string", "null"], "format": "date-time"},
            "decided_by": {"type": ["object", "null"]},
            "result": {"oneOf": [_ref("AskHumanToolResult"), {"type": "null"}]},
            "decision": {"type": ["object", "null"], "description": "Approvals: "
                         "{approved, reason} once decided.",
                         "properties": {"approved": {"type": "boolean"},
                                        "reason": {"type": "string"}}},
            "context": {"type": ["object", "null"]}, "idempotency_key": nullable_str,
            "links": {"type": "object"}}},
        "RequestList": {"type": "object", "properties": {
            "items": {"type": "array", "items": _ref("Request")},
            "next_cursor": nullable_str}},
        "CreateRun": {"type": "object", "additionalProperties": False,
                      "required": ["agent", "prompt"],
                      "properties": {"agent": {"type": "string"}, "prompt": {"type": "string"},
                                     "route": {"type": "string"}}},
        "Run": {"type": "object", "properties": {
            "id": {"type": "string"},
            "status": {"enum": ["queued", "running", "waiting", "succeeded", "failed"]},
            "agent": {"type": "string"}, "output": {}, "error": nullable_str,
            "requests": {"type": "array", "items": {"type": "object"}}}},
        "WebhookEvent": {"type": "object", "description": "Standard Webhooks body; headers "
                         "webhook-id (msg_<ref>), webhook-timestamp, webhook-signature.",
                         "properties": {"type": {"const": "request.resolved"},
                                        "timestamp": {"type": "string"},
                                        "data": _ref("Request")}},
    })
    return {"schemas": schemas, "securitySchemes": {
        "bearer": {"type": "http", "scheme": "bearer",
                   "description": "An API key from 'askhuman api-key create'."}}}


@functools.cache
def openapi_document() -> dict[str, Any]:
    ref_param = {"name": "ref", "in": "path", "required": True, "schema": {"type": "string"}}
    created = {"201": _json(_ref("Request"), "Created; the card is on its way"),
               "200": _json(_ref("Request"), "Replayed: this idempotency key's request")}
    return {
        "openapi": "3.1.0",
        "info": {"title": "askhuman API", "version": "1",
                 "description": "Ask people in Slack and Feishu for approvals and input from "
                                "any agent. Errors are RFC 9457 problem+json."},
        "security": [{"bearer": []}],
        "paths": {
            "/api/v1/requests": {
                "post": {"summary": "Ask a human (Dify ask_human v1 args)",
                         "requestBody": {"required": True, "content": {"application/json": {
                             "schema": _ref("CreateRequest")}}},
                         "responses": {**created, **_problems(400, 401, 403, 409, 413, 422,
                                                              429)},
                         "callbacks": {"resolved": {"{$request.body#/callback_url}": {"post": {
                             "requestBody": {"content": {"application/json": {
                                 "schema": _ref("WebhookEvent")}}},
                             "responses": {"200": {"description": "Received"}}}}}}},
                "get": {"summary": "Your requests, newest first",
                        "parameters": [
                            {"name": "status", "in": "query", "schema": {"enum": [
                                "open", "all", "pending", "submitted", "timeout", "cancelled",
                                "unavailable"]}},
                            {"name": "route", "in": "query", "schema": {"type": "string"}},
                            {"name": "limit", "in": "query", "schema": {
                                "type": "integer", "minimum": 1, "maximum": 100}},
                            {"name": "cursor", "in": "query", "schema": {"type": "string"}}],
                        "responses": {"200": _json(_ref("RequestList"), "A page"),
                                      **_problems(400, 401, 429)}}},
            "/api/v1/requests/{ref}": {"get": {
                "summary": "Status and, once resolved, the AskHumanToolResult",
                "parameters": [ref_param, {"name": "wait", "in": "query", "description":
                                           "Long-poll up to this many seconds (max 60).",
                                           "schema": {"type": "number", "minimum": 0,
                                                      "maximum": 60}}],
                "responses": {"200": _json(_ref("Request"), "The request"),
                              **_problems(400, 401, 404, 429)}}},
            "/api/v1/requests/{ref}/cancel": {"post": {
                "summary": "Resolve your request as cancelled",
                "parameters": [ref_param],
                "requestBody": {"content": {"application/json": {"schema": {
                    "type": "object", "properties": {"reason": {"type": "string"}}}}}},
                "responses": {"200": _json(_ref("Request"), "Cancelled"),
                              **_problems(401, 404, 409, 413, 422, 429)}}},
            "/api/v1/approvals": {"post": {
                "summary": "Ask for approval of a tool call (Approve / Reject)",
                "requestBody": {"required": True, "content": {"application/json": {
                    "schema": _ref("CreateApproval")}}},
                "responses": {**created, **_problems(400, 401, 403, 409, 413, 422, 429)}}},
            "/api/v1/runs": {"post": {
                "summary": "Start an embedded agent run from an event",
                "requestBody": {"required": True, "content": {"application/json": {
                    "schema": _ref("CreateRun")}}},
                "responses": {"202": _json(_ref("Run"), "Started"),
                              **_problems(400, 401, 403, 413, 422, 429)}}},
            "/api/v1/runs/{run_id}": {"get": {
                "summary": "A run's status and final output",
                "parameters": [{"name": "run_id", "in": "path", "required": True,
                                "schema": {"type": "string"}}],
                "responses": {"200": _json(_ref("Run"), "The run"),
                              **_problems(401, 404, 429)}}},
        },
        "components": _components(),
    }
