"""The OpenAPI 3.1 document served at ``/api/v1/openapi.json``.

It lists every status each operation can answer (every error as
``application/problem+json``), the headers that come with them, and ``links`` from
each create to its reads, so clients and stateful testers can follow them. Request
schemas are the validating pydantic models' own (``bot.api.openapi_schemas``), with
the ask_human guardrails of the server, or of the client whose key fetched the
document: a client generated from it never sends what the server refuses for its
shape. ``tests/api/test_schemathesis.py`` holds the live server to it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from bot.api.openapi_schemas import body_schemas, ref, response_schemas
from bot.askhuman.config import AskHumanConfig

MAX_WAIT = 60
REASONS = {
    400: "Malformed request: the body is not a JSON object, or a query parameter is "
         "out of range",
    401: "Missing, unknown or revoked key",
    403: "Not allowed for this client (route, agent, or the action is refused)",
    404: "Not found (or not this client's)",
    409: "Conflict: idempotency key reused with another body, or already resolved",
    413: "Body larger than the server's cap (checked before parsing)",
    422: "Invalid body, header or ask_human args (Dify's error text in detail)",
    429: "Rate limit exceeded (see Retry-After)",
    500: "Unexpected server error; the request can be retried",
}
_HEADERS = {
    401: {"WWW-Authenticate": {"required": True, "schema": {"type": "string"}}},
    429: {"Retry-After": {"required": True, "description": "Seconds until a token is free.",
                          "schema": {"type": "integer", "minimum": 0}}},
}


def _json(schema: dict[str, Any], description: str, **extra: Any) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}},
            **extra}


def _problems(*codes: int) -> dict[str, Any]:
    """The listed error statuses plus those every operation can answer (401, 429, 500)."""
    every = sorted({*codes, 401, 429, 500})
    return {str(code): {"description": REASONS[code],
                        **({"headers": _HEADERS[code]} if code in _HEADERS else {}),
                        "content": {"application/problem+json": {"schema": ref("Problem")}}}
            for code in every}


def _body(name: str, required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {"application/json": {"schema": ref(name)}}}


_REF = {"name": "ref", "in": "path", "required": True, "schema": {"type": "string"}}
_IDEMPOTENCY = {"name": "Idempotency-Key", "in": "header", "required": False,
                "description": "Same as the body's idempotency_key (the body's wins).",
                "schema": {"type": "string", "minLength": 1, "maxLength": 200}}
_TRACE = [
    {"name": "traceparent", "in": "header", "required": False, "schema": {"type": "string"},
     "description": "W3C Trace Context: the caller's span. Kept with the request; its spans "
                    "and webhook join this trace. A malformed value is ignored, not refused."},
    {"name": "tracestate", "in": "header", "required": False, "schema": {"type": "string"},
     "description": "W3C Trace Context vendor data, kept with a valid traceparent."}]
_LOCATION = {"Location": {"required": True, "schema": {"type": "string"}}}
_REQUEST_LINKS = {
    "GetRequest": {"operationId": "getRequest", "parameters": {"ref": "$response.body#/ref"},
                   "description": "Read (or long-poll) the request just created."},
    "CancelRequest": {"operationId": "cancelRequest",
                      "parameters": {"ref": "$response.body#/ref"}},
}


def _create(summary: str, op_id: str, body: str, links: dict[str, Any]) -> dict[str, Any]:
    replayed = {**_LOCATION, "Idempotent-Replayed": {"required": True, "schema": {
        "const": "true"}}}
    return {"operationId": op_id, "summary": summary, "parameters": [_IDEMPOTENCY, *_TRACE],
            "requestBody": _body(body),
            "responses": {
                "201": _json(ref("Request"), "Created; the card is on its way",
                             headers=_LOCATION, links=links),
                "200": _json(ref("Request"), "Replayed: this idempotency key's request",
                             headers=replayed, links=links),
                **_problems(400, 403, 409, 413, 422)}}


def _paths() -> dict[str, Any]:
    ask_links = {**_REQUEST_LINKS, "AnswerRequest": {
        "operationId": "answerRequest", "parameters": {"ref": "$response.body#/ref"}}}
    create_request = _create("Ask a human (Dify ask_human v1 args)", "createRequest",
                             "CreateRequest", ask_links)
    create_request["callbacks"] = {"resolved": {"{$request.body#/callback_url}": {"post": {
        "requestBody": {"content": {"application/json": {"schema": ref("WebhookEvent")}}},
        "responses": {"200": {"description": "Received"}}}}}}
    list_params = [
        {"name": "status", "in": "query", "schema": {"enum": [
            "open", "all", "pending", "submitted", "timeout", "cancelled", "unavailable"]}},
        {"name": "route", "in": "query", "schema": {"type": "string"}},
        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1,
                                                    "maximum": 100, "default": 50}},
        {"name": "cursor", "in": "query", "description": "next_cursor of the previous page.",
         "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,24}$"}}]
    wait = {"name": "wait", "in": "query", "description": "Long-poll up to this many seconds.",
            "schema": {"type": "number", "minimum": 0, "maximum": MAX_WAIT, "default": 0}}
    return {
        "/api/v1/openapi.json": {"get": {
            "operationId": "getOpenApi", "security": [],
            "summary": "This document (with a key: under that client's guardrails)",
            "responses": {"200": _json({"type": "object"}, "The document")}}},
        "/api/v1/me": {"get": {
            "operationId": "getMe", "summary": "This client: routes, agents, guardrails",
            "responses": {"200": _json(ref("Me"), "The client"), **_problems()}}},
        "/api/v1/requests": {
            "post": create_request,
            "get": {"operationId": "listRequests", "summary": "Your requests, newest first",
                    "parameters": list_params,
                    "responses": {"200": _json(ref("RequestList"), "A page"),
                                  **_problems(400)}}},
        "/api/v1/requests/{ref}": {"get": {
            "operationId": "getRequest",
            "summary": "Status and, once resolved, the AskHumanToolResult",
            "parameters": [_REF, wait],
            "responses": {"200": _json(ref("Request"), "The request"), **_problems(400, 404)}}},
        "/api/v1/requests/{ref}/cancel": {"post": {
            "operationId": "cancelRequest", "summary": "Resolve your request as cancelled",
            "parameters": [_REF], "requestBody": _body("CancelRequest", required=False),
            "responses": {"200": _json(ref("Request"), "Cancelled"),
                          **_problems(400, 403, 404, 409, 413, 422)}}},
        "/api/v1/requests/{ref}/answer": {"post": {
            "operationId": "answerRequest",
            "summary": "Answer your own request (an MCP client's local form); not approvals",
            "parameters": [_REF], "requestBody": _body("AnswerRequest"),
            "responses": {"200": _json(ref("Request"), "Answered"),
                          **_problems(400, 403, 404, 409, 413, 422)}}},
        "/api/v1/approvals": {"post": _create(
            "Ask for approval of a tool call (Approve / Reject)", "createApproval",
            "CreateApproval", _REQUEST_LINKS)},
        "/api/v1/runs": {"post": {
            "operationId": "createRun", "summary": "Start an embedded agent run from an event",
            "parameters": _TRACE, "requestBody": _body("CreateRun"),
            "responses": {"202": _json(ref("Run"), "Started", headers=_LOCATION, links={
                "GetRun": {"operationId": "getRun",
                           "parameters": {"run_id": "$response.body#/id"}}}),
                **_problems(400, 403, 413, 422)}}},
        "/api/v1/runs/{run_id}": {"get": {
            "operationId": "getRun", "summary": "A run's status and final output",
            "parameters": [{"name": "run_id", "in": "path", "required": True,
                            "schema": {"type": "string"}}],
            "responses": {"200": _json(ref("Run"), "The run"), **_problems(404)}}},
    }


def openapi_document(limits: AskHumanConfig, routes: Sequence[str] | None = None,
                     agents: Sequence[str] | None = None) -> dict[str, Any]:
    """The document under ``limits``; ``routes``/``agents`` narrow to one client's."""
    return _document(limits.model_dump_json(), tuple(routes or ()), tuple(agents or ()))


@functools.lru_cache(maxsize=64)
def _document(limits_json: str, routes: tuple[str, ...],
              agents: tuple[str, ...]) -> dict[str, Any]:
    limits = AskHumanConfig.model_validate_json(limits_json)
    return {
        "openapi": "3.1.0",
        "info": {"title": "askhuman API", "version": "1",
                 "description": "Ask people in Slack and Feishu for approvals and input from "
                                "any agent. Errors are RFC 9457 application/problem+json. "
                                "Other methods on these paths answer 405 with Allow."},
        "security": [{"bearer": []}],
        "paths": _paths(),
        "components": {
            "schemas": {**response_schemas(), **body_schemas(limits, routes, agents)},
            "securitySchemes": {"bearer": {
                "type": "http", "scheme": "bearer",
                "description": "An API key from 'askhuman api-key create'."}}},
    }
