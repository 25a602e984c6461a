"""The request schemas in the OpenAPI document and the validation cannot drift apart.

Bodies are generated from the document (schemathesis' strategies, offline) under a
non-default client config, then handed to the very validation the server runs
(``bot.api.bodies.parse``, the ask_human guardrails with ``strict=True``, the
client's routes and agents): every body the document calls valid is accepted
(except the cross-field rules JSON Schema cannot say, named in the document), and
every body it calls invalid is refused. A cap, pattern or required key changed on
one side only fails here.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.core import NotSet

from bot.api.args_schema import allowed_types
from bot.api.bodies import BODIES, AskBody, parse
from bot.api.openapi import openapi_document
from bot.api.problems import Problem
from bot.askhuman.config import AskHumanConfig
from bot.askhuman.tool import MAX_TITLE_CHARS, validate_and_normalize_args

CONFIG = AskHumanConfig(max_fields=3, max_actions=2, max_question_chars=50,
                        max_markdown_chars=40, max_field_label_chars=30,
                        max_action_label_chars=20, allow_file_fields=True,
                        allowed_field_types=["paragraph", "select", "number", "date", "file",
                                             "multi-select", "checkbox"])
ROUTES, AGENTS = ["ops"], ["deploy"]
DOCUMENT = openapi_document(CONFIG, ROUTES, AGENTS)
SCHEMA = schemathesis.openapi.from_dict(DOCUMENT)
CROSS_FIELD = ("must be unique", "duplicate option value", "default must match",
               "default must only contain", "min_value must be <=", "is not one of the args")
OPERATIONS = {("/api/v1/requests", "POST"): "CreateRequest",
              ("/api/v1/approvals", "POST"): "CreateApproval",
              ("/api/v1/runs", "POST"): "CreateRun",
              ("/api/v1/requests/{ref}/cancel", "POST"): "CancelRequest",
              ("/api/v1/requests/{ref}/answer", "POST"): "AnswerRequest"}
FAST = settings(max_examples=30, derandomize=True, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))


def refusal(schema_name: str, body: Any) -> str | None:
    """Why the server's validation refuses ``body`` (None: accepted)."""
    if isinstance(body, NotSet) and schema_name == "CancelRequest":
        body = {}  # no body: the server reads an optional body as {}
    if not isinstance(body, dict):
        return "not an object (400)"
    model = BODIES[schema_name]
    try:
        parsed = parse(model, body)
    except Problem as problem:
        return problem.detail
    if getattr(parsed, "route", None) not in (None, *ROUTES):
        return "route not this client's (403)"
    if getattr(parsed, "agent", None) not in (None, *AGENTS):
        return "agent not this client's (403)"
    if model is AskBody:
        try:
            validate_and_normalize_args(parsed.args, CONFIG, strict=True)
        except ValueError as exc:
            return str(exc)
    return None


def schema_valid(schema_name: str, body: Any) -> bool:
    schema = {"$ref": f"#/components/schemas/{schema_name}", **DOCUMENT}
    return bool(jsonschema.Draft202012Validator(schema).is_valid(body))


@pytest.mark.parametrize(("path", "method"), list(OPERATIONS))
def test_every_body_the_document_allows_is_accepted(path: str, method: str) -> None:
    name = OPERATIONS[(path, method)]

    @FAST
    @given(case=SCHEMA[path][method].as_strategy(GenerationMode.POSITIVE))
    def check(case: schemathesis.Case) -> None:
        why = refusal(name, case.body)
        assert why is None or any(rule in why for rule in CROSS_FIELD), (case.body, why)

    check()


@pytest.mark.parametrize(("path", "method"), list(OPERATIONS))
def test_every_body_the_document_forbids_is_refused(path: str, method: str) -> None:
    name = OPERATIONS[(path, method)]

    @FAST
    @given(case=SCHEMA[path][method].as_strategy(GenerationMode.NEGATIVE))
    def check(case: schemathesis.Case) -> None:
        if isinstance(case.body, NotSet) or schema_valid(name, case.body):
            return  # a negative case that negated something else (a header, the path)
        assert refusal(name, case.body) is not None, case.body

    check()


def test_the_caps_are_the_validations_own() -> None:
    schemas = DOCUMENT["components"]["schemas"]
    args = schemas["AskHumanToolArgs"]["properties"]
    assert args["question"]["maxLength"] == CONFIG.max_question_chars
    assert args["markdown"]["anyOf"][0]["maxLength"] == CONFIG.max_markdown_chars
    assert args["title"]["anyOf"][0]["maxLength"] == MAX_TITLE_CHARS
    assert args["fields"]["maxItems"] == CONFIG.max_fields
    assert args["actions"]["maxItems"] == CONFIG.max_actions
    assert set(args["fields"]["items"]["discriminator"]["mapping"]) == allowed_types(CONFIG)
    assert schemas["ParagraphField"]["properties"]["label"]["maxLength"] == \
        CONFIG.max_field_label_chars
    assert schemas["AskHumanAction"]["properties"]["label"]["maxLength"] == \
        CONFIG.max_action_label_chars
    assert schemas["CreateRequest"]["properties"]["route"]["enum"] == ROUTES
    assert schemas["CreateRun"]["properties"]["agent"]["enum"] == AGENTS
    for name, model in BODIES.items():
        assert set(schemas[name]["properties"]) == set(model.model_fields), name
        assert schemas[name]["additionalProperties"] is False


def test_default_guardrails_offer_only_difys_default_field_types() -> None:
    args = openapi_document(AskHumanConfig())["components"]["schemas"]["AskHumanToolArgs"]
    assert set(args["properties"]["fields"]["items"]["discriminator"]["mapping"]) == {
        "paragraph", "select"}
