"""Every schema rule and error text from Dify's ask_human v1 contract."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from bot.askhuman.schema import (
    AskHumanAction,
    AskHumanSelectedAction,
    AskHumanToolArgs,
    AskHumanToolResult,
    DeferredToolCallPayload,
    SelectOption,
    timeout_result,
)

Q = {"question": "Need a human answer"}


def _error(model: Any, data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        model.model_validate(data)
    return str(info.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"question": " "}, "question must not be blank"),
        ({"question": ""}, "at least 1 character"),
        ({**Q, "title": "  "}, "title must not be blank"),
        (
            {**Q, "fields": [{"type": "paragraph", "name": "1x", "label": "L"}]},
            "field name must be a valid identifier",
        ),
        (
            {**Q, "fields": [{"type": "paragraph", "name": "a-b", "label": "L"}]},
            "field name must be a valid identifier",
        ),
        (
            {**Q, "fields": [{"type": "paragraph", "name": "a", "label": " "}]},
            "field label must not be blank",
        ),
        (
            {**Q, "fields": [{"type": "select", "name": "s", "label": "S"}]},
            "select fields must define at least one option",
        ),
        (
            {
                **Q,
                "fields": [
                    {
                        "type": "select",
                        "name": "s",
                        "label": "S",
                        "options": [{"value": "a", "label": "A"}, {"value": "a", "label": "B"}],
                    }
                ],
            },
            "select field 's' contains duplicate option value 'a'",
        ),
        (
            {
                **Q,
                "fields": [
                    {
                        "type": "select",
                        "name": "s",
                        "label": "S",
                        "default": "z",
                        "options": [{"value": "a", "label": "A"}],
                    }
                ],
            },
            "select field 's' default must match one of its option values",
        ),
        (
            {
                **Q,
                "fields": [
                    {
                        "type": "select",
                        "name": "s",
                        "label": "S",
                        "options": [{"value": " ", "label": "A"}],
                    }
                ],
            },
            "select option value must not be blank",
        ),
        (
            {
                **Q,
                "fields": [
                    {
                        "type": "select",
                        "name": "s",
                        "label": "S",
                        "options": [{"value": "a", "label": " "}],
                    }
                ],
            },
            "select option label must not be blank",
        ),
        (
            {
                **Q,
                "fields": [
                    {"type": "paragraph", "name": "a", "label": "A"},
                    {"type": "paragraph", "name": "a", "label": "B"},
                ],
            },
            "field name 'a' must be unique",
        ),
        (
            {**Q, "actions": [{"id": "go", "label": "Go"}, {"id": "go", "label": "Again"}]},
            "action id 'go' must be unique",
        ),
        (
            {**Q, "actions": [{"id": "go now", "label": "Go"}]},
            "action id must be a valid identifier",
        ),
        ({**Q, "actions": [{"id": "go", "label": "\t"}]}, "action label must not be blank"),
        ({**Q, "actions": [{"id": "go", "label": "Go", "style": "loud"}]}, "style"),
        ({**Q, "urgency": "low"}, "urgency"),
        (
            {**Q, "fields": [{"type": "file", "name": "f", "label": "F", "max_files": 0}]},
            "greater than or equal to 1",
        ),
        ({**Q, "fields": [{"type": "rich", "name": "f", "label": "F"}]}, "does not match any"),
        ({**Q, "extra": 1}, "Extra inputs are not permitted"),
        (
            {**Q, "fields": [{"type": "paragraph", "name": "a", "label": "A", "x": 1}]},
            "Extra inputs are not permitted",
        ),
    ],
)
def test_args_rules(data: dict[str, Any], message: str) -> None:
    assert message in _error(AskHumanToolArgs, data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"id": "9", "label": "x"}, "selected action id must be a valid identifier"),
        ({"id": "ok", "label": " "}, "selected action label must not be blank"),
    ],
)
def test_selected_action_rules(data: dict[str, Any], message: str) -> None:
    assert message in _error(AskHumanSelectedAction, data)


def test_identifier_accepts_underscore_prefix_and_digits() -> None:
    AskHumanAction(id="_a1", label="A")
    AskHumanSelectedAction(id="__timeout", label="Timeout")


def test_dump_matches_dify_normalized_example() -> None:
    args = AskHumanToolArgs.model_validate(
        {
            **Q,
            "fields": [{"type": "paragraph", "name": "comment", "label": "Comment"}],
            "actions": [{"id": "submit", "label": "Submit", "style": "primary"}],
        }
    )
    assert args.model_dump(mode="json") == {
        "title": None,
        "question": "Need a human answer",
        "markdown": None,
        "fields": [
            {
                "name": "comment",
                "label": "Comment",
                "required": False,
                "type": "paragraph",
                "placeholder": None,
                "default": None,
            }
        ],
        "actions": [{"id": "submit", "label": "Submit", "style": "primary"}],
        "urgency": "normal",
    }
    assert list(args.model_dump()["fields"][0]) == [
        "name",
        "label",
        "required",
        "type",
        "placeholder",
        "default",
    ]


def test_defaults() -> None:
    args = AskHumanToolArgs.model_validate(Q)
    assert (args.title, args.markdown, args.fields, args.actions, args.urgency) == (
        None,
        None,
        [],
        [],
        "normal",
    )
    result = AskHumanToolResult(status="submitted")
    assert result.model_dump() == {
        "status": "submitted",
        "action": None,
        "values": {},
        "message": None,
        "rendered_content": None,
    }
    assert AskHumanAction(id="a", label="A").style == "default"


def test_result_status_is_closed_set() -> None:
    assert "status" in _error(AskHumanToolResult, {"status": "approved"})
    assert "Field required" in _error(AskHumanToolResult, {})


def test_timeout_result_is_difys() -> None:
    assert timeout_result().model_dump(mode="json") == {
        "status": "timeout",
        "action": {"id": "__timeout", "label": "Timeout"},
        "values": {},
        "message": "The human did not respond before the workflow timeout.",
        "rendered_content": None,
    }


def test_deferred_payload_forbids_extra() -> None:
    assert "Extra inputs" in _error(
        DeferredToolCallPayload, {"tool_call_id": "c", "tool_name": "t", "args": {}, "x": 1}
    )


def test_json_schema_shape() -> None:
    schema = AskHumanToolArgs.model_json_schema()
    assert schema["required"] == ["question"]
    assert schema["additionalProperties"] is False
    union = schema["properties"]["fields"]["items"]
    assert union["discriminator"]["propertyName"] == "type"
    for name in (
        "SelectOption",
        "AskHumanAction",
        "AskHumanActionStyle",
        "AskHumanUrgency",
        "ParagraphField",
        "SelectField",
        "FileField",
        "FileListField",
    ):
        assert name in schema["$defs"]
    for name, definition in schema["$defs"].items():
        if definition.get("type") == "object":
            assert definition["additionalProperties"] is False, name
    assert "maxLength" not in str(schema) and "maxItems" not in str(schema)


def test_select_option_min_length() -> None:
    assert "at least 1 character" in _error(SelectOption, {"value": "", "label": "x"})


@pytest.mark.parametrize(
    ("field", "message"),
    [
        (
            {"type": "multi-select", "name": "m", "label": "M"},
            "select fields must define at least one option",
        ),
        (
            {
                "type": "multi-select",
                "name": "m",
                "label": "M",
                "default": ["z"],
                "options": [{"value": "a", "label": "A"}],
            },
            "multi-select field 'm' default must only contain its option values",
        ),
        (
            {"type": "number", "name": "n", "label": "N", "min_value": 5, "max_value": 1},
            "number field 'n' min_value must be <= max_value",
        ),
        (
            {"type": "date", "name": "d", "label": "D", "default": "31/12/2026"},
            "date field default must be a YYYY-MM-DD date",
        ),
        ({"type": "checkbox", "name": "c", "label": "C", "default": "maybe"}, "bool"),
    ],
)
def test_extension_field_rules(field: dict[str, Any], message: str) -> None:
    assert message in _error(AskHumanToolArgs, {**Q, "fields": [field]})


def test_extension_fields_parse() -> None:
    args = AskHumanToolArgs.model_validate(
        {
            **Q,
            "fields": [
                {
                    "type": "multi-select",
                    "name": "m",
                    "label": "M",
                    "default": ["a"],
                    "options": [{"value": "a", "label": "A"}],
                },
                {"type": "number", "name": "n", "label": "N", "default": 2.5},
                {"type": "checkbox", "name": "c", "label": "C", "default": True},
                {"type": "date", "name": "d", "label": "D", "default": "2026-12-01"},
            ],
        }
    )
    assert [f.type for f in args.fields] == ["multi-select", "number", "checkbox", "date"]
