"""The ask-human layer config: what the model may ask for, capped by hard limits.

It mirrors Dify's ``DifyAskHumanLayerConfig``. It only shapes the model-facing tool;
delivery, recipients, approvers and timeouts live in the admin settings instead,
because the model must never control them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bot.askhuman.schema import FILE_FIELD_TYPES, IDENTIFIER_PATTERN, AskHumanFieldType

DIFY_ASK_HUMAN_LAYER_TYPE_ID = "dify.ask_human"
SCHEMA_VERSION = 1

DEFAULT_ASK_HUMAN_TOOL_DESCRIPTION = (
    "Ask a human for missing information or a decision that is required to continue. "
    "Use this only when the answer cannot be inferred from the conversation, available "
    "tools, or current context. Provide concise instructions, structured fields, and "
    "clear actions for the human."
)

HARD_LIMITS: dict[str, int] = {
    "max_fields": 16,
    "max_actions": 8,
    "max_markdown_chars": 20000,
    "max_question_chars": 4000,
    "max_field_label_chars": 200,
    "max_action_label_chars": 120,
}


def _dify_field_types() -> list[AskHumanFieldType]:
    return ["paragraph", "select"]


class AskHumanConfig(BaseModel):
    """Guardrails for one agent's ask-human tool (Dify's defaults unless overridden)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    tool_name: str = "ask_human"
    tool_description: str | None = None
    max_fields: int = Field(default=8, ge=0)
    max_actions: int = Field(default=4, ge=1)
    allowed_field_types: list[AskHumanFieldType] = Field(default_factory=_dify_field_types)
    allow_file_fields: bool = False
    max_markdown_chars: int = Field(default=8000, ge=0)
    max_question_chars: int = Field(default=1000, ge=1)
    max_field_label_chars: int = Field(default=120, ge=1)
    max_action_label_chars: int = Field(default=80, ge=1)

    @field_validator("tool_name")
    @classmethod
    def _tool_name_is_identifier(cls, v: str) -> str:
        if IDENTIFIER_PATTERN.fullmatch(v) is None:
            raise ValueError("tool_name must be a valid tool identifier")
        return v

    @field_validator("tool_description")
    @classmethod
    def _blank_description_is_none(cls, v: str | None) -> str | None:
        if v is None:
            return None
        v = v.strip()
        return v or None

    @field_validator("allowed_field_types")
    @classmethod
    def _no_duplicate_types(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("allowed_field_types must not contain duplicates")
        return v

    @model_validator(mode="after")
    def _within_hard_limits(self) -> AskHumanConfig:
        for field_name, hard_limit in HARD_LIMITS.items():
            if getattr(self, field_name) > hard_limit:
                raise ValueError(f"{field_name} must be <= {hard_limit}")
        return self

    @model_validator(mode="after")
    def _file_field_policy(self) -> AskHumanConfig:
        file_types = [t for t in self.allowed_field_types if t in FILE_FIELD_TYPES]
        if file_types and not self.allow_file_fields:
            raise ValueError(
                "allowed_field_types cannot include file field types when "
                f"allow_file_fields is false: {', '.join(file_types)}"
            )
        return self

    @property
    def effective_description(self) -> str:
        return self.tool_description or DEFAULT_ASK_HUMAN_TOOL_DESCRIPTION


# Dify's name for the same model, for readers coming from there.
DifyAskHumanLayerConfig = AskHumanConfig
