"""The ask-human wire contract, faithful to Dify Agent's ``dify.ask_human`` schema v1.

Every model forbids extra keys and the error texts match Dify's byte for byte, so a
request produced here can be resumed by a Dify Agent client and vice versa. The
field types ``multi-select``, ``number``, ``checkbox`` and ``date`` are askhuman's
opt-in extension; they are only ever accepted when the layer config lists them.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator
from typing_extensions import TypeAliasType

IDENTIFIER_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

DIFY_FIELD_TYPES: tuple[str, ...] = ("paragraph", "select", "file", "file-list")
EXTENSION_FIELD_TYPES: tuple[str, ...] = ("multi-select", "number", "checkbox", "date")
FILE_FIELD_TYPES: tuple[str, ...] = ("file", "file-list")

AskHumanFieldType = TypeAliasType(
    "AskHumanFieldType",
    Literal[
        "paragraph", "select", "file", "file-list", "multi-select", "number", "checkbox", "date"
    ],
)
AskHumanActionStyle = TypeAliasType(
    "AskHumanActionStyle", Literal["default", "primary", "destructive"]
)
AskHumanUrgency = TypeAliasType("AskHumanUrgency", Literal["normal", "high"])
AskHumanResultStatus = TypeAliasType(
    "AskHumanResultStatus", Literal["submitted", "timeout", "cancelled", "unavailable"]
)

TIMEOUT_ACTION_ID = "__timeout"
TIMEOUT_MESSAGE = "The human did not respond before the workflow timeout."


def is_identifier(value: str) -> bool:
    """Return whether ``value`` is a valid field name / action id."""
    return IDENTIFIER_PATTERN.fullmatch(value) is not None


def _require_identifier(value: str, what: str) -> str:
    if not is_identifier(value):
        raise ValueError(f"{what} must be a valid identifier")
    return value


def _require_non_blank(value: str, label: str) -> str:
    if not value.strip():
        raise ValueError(f"{label} must not be blank")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SelectOption(_Strict):
    """One choice of a select or multi-select field."""

    value: str = Field(min_length=1)
    label: str = Field(min_length=1)

    @field_validator("value")
    @classmethod
    def _value_not_blank(cls, v: str) -> str:
        return _require_non_blank(v, "select option value")

    @field_validator("label")
    @classmethod
    def _label_not_blank(cls, v: str) -> str:
        return _require_non_blank(v, "select option label")


class FieldBase(_Strict):
    """Keys shared by every field; listed first so dumps read ``name, label, required, type``."""

    name: str = Field(min_length=1)
    label: str = Field(min_length=1)
    required: bool = False

    @field_validator("name")
    @classmethod
    def _name_is_identifier(cls, v: str) -> str:
        return _require_identifier(v, "field name")

    @field_validator("label")
    @classmethod
    def _label_not_blank(cls, v: str) -> str:
        return _require_non_blank(v, "field label")


class ParagraphField(FieldBase):
    type: Literal["paragraph"] = "paragraph"
    placeholder: str | None = None
    default: str | None = None


def _check_options(name: str, options: list[SelectOption]) -> set[str]:
    if not options:
        raise ValueError("select fields must define at least one option")
    seen: set[str] = set()
    for option in options:
        if option.value in seen:
            raise ValueError(
                f"select field '{name}' contains duplicate option value '{option.value}'"
            )
        seen.add(option.value)
    return seen


class SelectField(FieldBase):
    type: Literal["select"] = "select"
    options: list[SelectOption] = Field(default_factory=list)
    default: str | None = None

    @model_validator(mode="after")
    def _options_are_valid(self) -> SelectField:
        values = _check_options(self.name, self.options)
        if self.default is not None and self.default not in values:
            raise ValueError(
                f"select field '{self.name}' default must match one of its option values"
            )
        return self


class FileField(FieldBase):
    type: Literal["file"] = "file"
    max_files: int | None = Field(default=None, ge=1)


class FileListField(FieldBase):
    type: Literal["file-list"] = "file-list"
    max_files: int | None = Field(default=None, ge=1)


class MultiSelectField(FieldBase):
    """Extension: choose any number of options; the value is a list of option values."""

    type: Literal["multi-select"] = "multi-select"
    options: list[SelectOption] = Field(default_factory=list)
    default: list[str] | None = None

    @model_validator(mode="after")
    def _options_are_valid(self) -> MultiSelectField:
        values = _check_options(self.name, self.options)
        for item in self.default or []:
            if item not in values:
                raise ValueError(
                    f"multi-select field '{self.name}' default must only contain its option values"
                )
        return self


class NumberField(FieldBase):
    """Extension: a number typed as text and parsed on the server (int or float)."""

    type: Literal["number"] = "number"
    placeholder: str | None = None
    default: int | float | None = None
    min_value: int | float | None = None
    max_value: int | float | None = None

    @model_validator(mode="after")
    def _bounds_are_ordered(self) -> NumberField:
        lo, hi = self.min_value, self.max_value
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"number field '{self.name}' min_value must be <= max_value")
        return self


class CheckboxField(FieldBase):
    """Extension: a single yes/no box; the value is a bool."""

    type: Literal["checkbox"] = "checkbox"
    default: bool | None = None


class DateField(FieldBase):
    """Extension: a calendar date; the value is ``YYYY-MM-DD``."""

    type: Literal["date"] = "date"
    default: str | None = None

    @field_validator("default")
    @classmethod
    def _default_is_iso_date(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                dt.date.fromisoformat(v)
            except ValueError:
                raise ValueError("date field default must be a YYYY-MM-DD date") from None
        return v


AskHumanField = Annotated[
    ParagraphField
    | SelectField
    | FileField
    | FileListField
    | MultiSelectField
    | NumberField
    | CheckboxField
    | DateField,
    Field(discriminator="type"),
]

FIELD_MODELS: dict[str, type[FieldBase]] = {
    "paragraph": ParagraphField,
    "select": SelectField,
    "file": FileField,
    "file-list": FileListField,
    "multi-select": MultiSelectField,
    "number": NumberField,
    "checkbox": CheckboxField,
    "date": DateField,
}


class AskHumanAction(_Strict):
    """A button the human can press; ``id`` comes back in the result."""

    id: str = Field(min_length=1)
    label: str = Field(min_length=1)
    style: AskHumanActionStyle = "default"

    @field_validator("id")
    @classmethod
    def _id_is_identifier(cls, v: str) -> str:
        return _require_identifier(v, "action id")

    @field_validator("label")
    @classmethod
    def _label_not_blank(cls, v: str) -> str:
        return _require_non_blank(v, "action label")


class AskHumanSelectedAction(_Strict):
    """The action the human chose, echoed back to the model."""

    id: str
    label: str

    @field_validator("id")
    @classmethod
    def _id_is_identifier(cls, v: str) -> str:
        return _require_identifier(v, "selected action id")

    @field_validator("label")
    @classmethod
    def _label_not_blank(cls, v: str) -> str:
        return _require_non_blank(v, "selected action label")


class AskHumanToolArgs(_Strict):
    """What the model may ask for. All of it is untrusted, displayed-only content."""

    title: str | None = None
    question: str = Field(min_length=1)
    markdown: str | None = None
    fields: list[AskHumanField] = Field(default_factory=list)
    actions: list[AskHumanAction] = Field(default_factory=list)
    urgency: AskHumanUrgency = "normal"

    @field_validator("title")
    @classmethod
    def _title_not_blank(cls, v: str | None) -> str | None:
        return None if v is None else _require_non_blank(v, "title")

    @field_validator("question")
    @classmethod
    def _question_not_blank(cls, v: str) -> str:
        return _require_non_blank(v, "question")

    @model_validator(mode="after")
    def _names_are_unique(self) -> AskHumanToolArgs:
        names: set[str] = set()
        for field in self.fields:
            if field.name in names:
                raise ValueError(f"field name '{field.name}' must be unique")
            names.add(field.name)
        ids: set[str] = set()
        for action in self.actions:
            if action.id in ids:
                raise ValueError(f"action id '{action.id}' must be unique")
            ids.add(action.id)
        return self

    def action(self, action_id: str) -> AskHumanAction | None:
        """Return the action with ``action_id``, if the request offers it."""
        return next((a for a in self.actions if a.id == action_id), None)


class AskHumanToolResult(_Strict):
    """What the human (or the system, on timeout/cancel/failure) answers."""

    status: AskHumanResultStatus
    action: AskHumanSelectedAction | None = None
    values: dict[str, JsonValue] = Field(default_factory=dict)
    message: str | None = None
    rendered_content: str | None = None


class DeferredToolCallPayload(_Strict):
    """The ``deferred_tool_call`` branch of a successful run."""

    tool_call_id: str
    tool_name: str
    args: JsonValue
    metadata: dict[str, JsonValue] = Field(default_factory=dict)


# Dify calls the payload class ``DeferredToolCallPayload``; the architecture page says
# ``DeferredToolCall``. Both names point at the same model.
DeferredToolCall = DeferredToolCallPayload


class DeferredToolResultsPayload(_Strict):
    """The ``deferred_tool_results`` of a resume request: results keyed by tool_call_id."""

    calls: dict[str, JsonValue] = Field(default_factory=dict)
    metadata: dict[str, dict[str, JsonValue]] = Field(default_factory=dict)


def timeout_result() -> AskHumanToolResult:
    """The exact result Dify documents for a human who never answered."""
    return AskHumanToolResult(
        status="timeout",
        action=AskHumanSelectedAction(id=TIMEOUT_ACTION_ID, label="Timeout"),
        values={},
        message=TIMEOUT_MESSAGE,
    )


def cancelled_result(message: str) -> AskHumanToolResult:
    """A request withdrawn by an operator or by the run's owner."""
    return AskHumanToolResult(status="cancelled", values={}, message=message)


def unavailable_result(message: str) -> AskHumanToolResult:
    """Nobody could be reached (delivery failed for good)."""
    return AskHumanToolResult(status="unavailable", values={}, message=message)
