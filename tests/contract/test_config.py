"""The layer config: Dify's defaults, hard caps, file double switch and error texts."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from bot.askhuman.config import DEFAULT_ASK_HUMAN_TOOL_DESCRIPTION, AskHumanConfig


def test_defaults_match_dify() -> None:
    config = AskHumanConfig()
    assert config.model_dump() == {
        "enabled": True,
        "tool_name": "ask_human",
        "tool_description": None,
        "max_fields": 8,
        "max_actions": 4,
        "allowed_field_types": ["paragraph", "select"],
        "allow_file_fields": False,
        "max_markdown_chars": 8000,
        "max_question_chars": 1000,
        "max_field_label_chars": 120,
        "max_action_label_chars": 80,
    }
    assert config.effective_description == DEFAULT_ASK_HUMAN_TOOL_DESCRIPTION


@pytest.mark.parametrize(
    ("field", "hard"),
    [
        ("max_fields", 16),
        ("max_actions", 8),
        ("max_markdown_chars", 20000),
        ("max_question_chars", 4000),
        ("max_field_label_chars", 200),
        ("max_action_label_chars", 120),
    ],
)
def test_hard_caps(field: str, hard: int) -> None:
    AskHumanConfig.model_validate({field: hard})
    with pytest.raises(ValidationError) as info:
        AskHumanConfig.model_validate({field: hard + 1})
    assert f"{field} must be <= {hard}" in str(info.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"tool_name": "ask-human"}, "tool_name must be a valid tool identifier"),
        (
            {"allowed_field_types": ["paragraph", "paragraph"]},
            "allowed_field_types must not contain duplicates",
        ),
        (
            {"allowed_field_types": ["paragraph", "file", "file-list"]},
            "allowed_field_types cannot include file field types when allow_file_fields is "
            "false: file, file-list",
        ),
        ({"max_fields": -1}, "greater than or equal to 0"),
        ({"max_actions": 0}, "greater than or equal to 1"),
        ({"unknown": 1}, "Extra inputs are not permitted"),
        ({"allowed_field_types": ["video"]}, "allowed_field_types"),
    ],
)
def test_config_errors(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as info:
        AskHumanConfig.model_validate(data)
    assert message in str(info.value)


def test_file_fields_need_both_switches() -> None:
    config = AskHumanConfig(allow_file_fields=True, allowed_field_types=["file"])
    assert config.allowed_field_types == ["file"]
    AskHumanConfig(allow_file_fields=True)  # switch on alone is fine; types stay Dify's


def test_blank_description_becomes_none() -> None:
    assert AskHumanConfig(tool_description="   ").tool_description is None
    assert AskHumanConfig(tool_description=" Ask ").tool_description == "Ask"
    assert AskHumanConfig(tool_description="Ask").effective_description == "Ask"
