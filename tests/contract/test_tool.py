"""The external tool: prompt hint, argument checks (→ ModelRetry) and payload builder."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from bot.askhuman.config import AskHumanConfig
from bot.askhuman.tool import (
    NEVER_EXECUTED_MESSAGE,
    build_ask_human_tool,
    build_deferred_tool_call_payload,
    build_prompt_hint,
    tool_parameters_schema,
    validate_and_normalize_args,
)

Q = {"question": "Need a human answer"}

DEFAULT_HINT = (
    "You may call the external tool 'ask_human' only when human input is required to "
    "continue. Do not ask a human for information that can be inferred from the "
    "conversation, current context, or other tools.\n\nAsk-human guardrails:\n"
    "- Allowed field types: paragraph, select.\n- File upload fields are disabled.\n"
    "- Use at most 8 field(s).\n- Use at most 4 action(s).\n"
    "- Keep 'question' under 1000 characters.\n- Keep 'markdown' under 8000 characters.\n"
    "- Keep each field label under 120 characters.\n"
    "- Keep each action label under 80 characters.\n"
    "- If you omit actions, the system will add one primary action: Submit.\n"
    "Prefer concise, structured requests that stay comfortably within these limits."
)


def test_prompt_hint_default_wording() -> None:
    assert build_prompt_hint(AskHumanConfig()) == DEFAULT_HINT


def test_prompt_hint_placeholders() -> None:
    hint = build_prompt_hint(
        AskHumanConfig(
            tool_name="ask_ops", max_fields=0, allowed_field_types=[], allow_file_fields=True
        )
    )
    assert hint is not None
    assert "'ask_ops'" in hint
    assert "- Allowed field types: none.\n" in hint
    assert "- File upload fields are enabled.\n" in hint
    assert "- Do not add any fields.\n" in hint


def test_disabled_layer_has_no_tool_and_no_hint() -> None:
    config = AskHumanConfig(enabled=False)
    assert build_prompt_hint(config) is None
    assert build_ask_human_tool(config) is None


def test_default_submit_action_added() -> None:
    args = validate_and_normalize_args(Q, AskHumanConfig())
    assert [a.model_dump() for a in args.actions] == [
        {"id": "submit", "label": "Submit", "style": "primary"}
    ]
    assert validate_and_normalize_args('{"question": "Q?"}', AskHumanConfig()).question == "Q?"


FIELD = {"type": "paragraph", "name": "f", "label": "F"}


@pytest.mark.parametrize(
    ("raw", "config", "message"),
    [
        (
            {**Q, "fields": [FIELD, {**FIELD, "name": "g"}]},
            {"max_fields": 1},
            "ask_human fields must contain at most 1 item(s)",
        ),
        (
            {**Q, "actions": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}]},
            {"max_actions": 1},
            "ask_human actions must contain at most 1 item(s)",
        ),
        (
            {"question": "x" * 11},
            {"max_question_chars": 10},
            "ask_human question must be <= 10 characters",
        ),
        (
            {**Q, "markdown": "m" * 6},
            {"max_markdown_chars": 5},
            "ask_human markdown must be <= 5 characters",
        ),
        (
            {**Q, "fields": [{**FIELD, "type": "number"}]},
            {},
            "ask_human field type 'number' is not allowed by this layer config",
        ),
        (
            {**Q, "fields": [{**FIELD, "label": "L" * 4}]},
            {"max_field_label_chars": 3},
            "ask_human field label 'LLLL' must be <= 3 characters",
        ),
        (
            {**Q, "fields": [{"type": "file", "name": "f", "label": "F"}]},
            {"allowed_field_types": []},
            "ask_human field type 'file' is not allowed by this layer config",
        ),
        (
            {**Q, "actions": [{"id": "a", "label": "Go!"}]},
            {"max_action_label_chars": 2},
            "ask_human action label 'Go!' must be <= 2 characters",
        ),
        (
            {**Q, "fields": [FIELD, FIELD]},
            {"max_fields": 1},
            "field name 'f' must be unique",
        ),  # schema errors come first
    ],
)
def test_validation_errors(raw: dict[str, Any], config: dict[str, Any], message: str) -> None:
    with pytest.raises((ValueError, ValidationError)) as info:
        validate_and_normalize_args(raw, AskHumanConfig(**config))
    assert message in str(info.value)


SEL = {"type": "select", "name": "s", "label": "S"}


@pytest.mark.parametrize(("raw", "message"), [
    ({**Q, "title": "t" * 301}, "ask_human title must be <= 300 characters"),
    ({**Q, "actions": [{"id": "a" * 65, "label": "A"}]},
     "ask_human action id must be <= 64 characters"),
    ({**Q, "fields": [{"type": "paragraph", "name": "n" * 65, "label": "L"}]},
     "ask_human field name must be <= 64 characters"),
    ({**Q, "fields": [{**SEL, "options": [{"value": f"v{i}", "label": "L"}
                                          for i in range(101)]}]},
     "ask_human field 's' must have at most 100 options"),
    ({**Q, "fields": [{**SEL, "options": [{"value": "v", "label": "L" * 201}]}]},
     "ask_human field 's' option values and labels must be <= 200 characters"),
    ({**Q, "fields": [{"type": "paragraph", "name": "p", "label": "P",
                       "placeholder": "x" * 501}]},
     "ask_human field 'p' placeholder must be <= 500 characters"),
    ({**Q, "fields": [{"type": "paragraph", "name": "p", "label": "P",
                       "default": "x" * 5_000_000}]},
     "ask_human field 'p' default must be <= 3000 characters"),
])
def test_oversize_text_dify_leaves_unbounded_is_refused(raw: dict[str, Any],
                                                        message: str) -> None:
    """Titles, ids, options and prefills end up in buttons and callbacks: oversize
    ones are a ModelRetry (ValueError here), never a card nobody can answer."""
    with pytest.raises(ValueError) as info:
        validate_and_normalize_args(raw, AskHumanConfig())
    assert message in str(info.value)


def test_limits_are_inclusive() -> None:
    config = AskHumanConfig(max_question_chars=10, max_markdown_chars=5)
    validate_and_normalize_args({"question": "x" * 10, "markdown": "m" * 5}, config)


def test_file_fields_disabled_message() -> None:
    # Reachable only if a config lists file types without the switch (built unvalidated).
    config = AskHumanConfig.model_construct(
        **{**AskHumanConfig().model_dump(), "allowed_field_types": ["file"]}
    )
    with pytest.raises(ValueError, match="ask_human file fields are disabled by this layer config"):
        validate_and_normalize_args(
            {**Q, "fields": [{"type": "file", "name": "f", "label": "F"}]}, config
        )


def test_extension_types_opt_in() -> None:
    config = AskHumanConfig(allowed_field_types=["paragraph", "select", "number", "date"])
    args = validate_and_normalize_args(
        {**Q, "fields": [{"type": "number", "name": "n", "label": "N"}]}, config
    )
    assert args.fields[0].type == "number"


def test_schema_shows_only_allowed_extensions() -> None:
    default = tool_parameters_schema(AskHumanConfig())
    mapping = default["properties"]["fields"]["items"]["discriminator"]["mapping"]
    assert sorted(mapping) == ["file", "file-list", "paragraph", "select"]
    assert "NumberField" not in default["$defs"]
    extended = tool_parameters_schema(AskHumanConfig(allowed_field_types=["paragraph", "number"]))
    mapping = extended["properties"]["fields"]["items"]["discriminator"]["mapping"]
    assert "number" in mapping and "date" not in mapping
    assert "NumberField" in extended["$defs"] and "DateField" not in extended["$defs"]


def _requests(
    *calls: ToolCallPart, approvals: list[ToolCallPart] | None = None
) -> DeferredToolRequests:
    return DeferredToolRequests(calls=list(calls), approvals=approvals or [])


def test_payload_builder() -> None:
    payload = build_deferred_tool_call_payload(
        _requests(ToolCallPart("ask_human", {"question": "Ok?"}, tool_call_id="c1")),
        AskHumanConfig(),
    )
    assert payload.model_dump() == {
        "tool_call_id": "c1",
        "tool_name": "ask_human",
        "args": {
            "title": None,
            "question": "Ok?",
            "markdown": None,
            "fields": [],
            "actions": [{"id": "submit", "label": "Submit", "style": "primary"}],
            "urgency": "normal",
        },
        "metadata": {"layer_type": "dify.ask_human", "tool_name": "ask_human", "schema_version": 1},
    }


@pytest.mark.parametrize(
    ("requests", "message"),
    [
        (
            _requests(approvals=[ToolCallPart("ask_human", {}, tool_call_id="a")]),
            "ask_human does not support approval requests; use external deferred calls only",
        ),
        (
            _requests(
                ToolCallPart("ask_human", Q, tool_call_id="a"),
                ToolCallPart("ask_human", Q, tool_call_id="b"),
            ),
            "ask_human supports exactly one deferred call per run in this version; got 2.",
        ),
        (
            _requests(),
            "ask_human supports exactly one deferred call per run in this version; got 0.",
        ),
        (
            _requests(ToolCallPart("other", Q, tool_call_id="a")),
            "ask_human deferred tool name must be 'ask_human', got 'other'.",
        ),
    ],
)
def test_payload_builder_errors(requests: DeferredToolRequests, message: str) -> None:
    with pytest.raises(ValueError) as info:
        build_deferred_tool_call_payload(requests, AskHumanConfig())
    assert str(info.value) == message


def _agent(model: FunctionModel, config: AskHumanConfig | None = None) -> Agent[None, Any]:
    tool = build_ask_human_tool(config or AskHumanConfig())
    assert tool is not None
    return Agent(model, output_type=[str, DeferredToolRequests], tools=[tool])


async def test_tool_definition_is_external() -> None:
    seen: list[AgentInfo] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info)
        return ModelResponse(parts=[TextPart("no need to ask")])

    await _agent(FunctionModel(model)).run("hi")
    (tool,) = seen[0].function_tools
    assert (tool.name, tool.kind, tool.strict, tool.sequential) == (
        "ask_human",
        "external",
        False,
        True,
    )
    assert tool.parameters_json_schema == tool_parameters_schema(AskHumanConfig())


async def test_invalid_args_retry_instead_of_crash() -> None:
    retries: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        for part in last.parts:
            if isinstance(part, RetryPromptPart | ToolReturnPart):
                retries.append(str(part.content))
        if not retries:
            return ModelResponse(
                parts=[ToolCallPart("ask_human", {"question": "x" * 1001}, tool_call_id="bad")]
            )
        return ModelResponse(parts=[ToolCallPart("ask_human", Q, tool_call_id="good")])

    result = await _agent(FunctionModel(model)).run("go")
    assert isinstance(result.output, DeferredToolRequests)
    assert [c.tool_call_id for c in result.output.calls] == ["good"]
    assert "ask_human question must be <= 1000 characters" in retries[0]


async def test_retries_exhausted_fail_the_run() -> None:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart("ask_human", {"question": " "})])

    with pytest.raises(Exception, match="exceeded max retries count of 1"):
        await _agent(FunctionModel(model)).run("go")


def test_tool_function_never_executes() -> None:
    tool = build_ask_human_tool(AskHumanConfig())
    assert tool is not None
    with pytest.raises(RuntimeError, match=NEVER_EXECUTED_MESSAGE):
        tool.function(None, question="x")  # type: ignore[call-arg]


async def test_schema_is_built_once_per_config_not_per_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The schema is costly (model_json_schema); steps of a run must reuse it."""
    from bot.askhuman import args as args_module
    from bot.askhuman.schema import AskHumanToolArgs

    args_module._parameters_schema.cache_clear()
    built: list[int] = []
    original = AskHumanToolArgs.model_json_schema

    def counting(*args: Any, **kwargs: Any) -> dict[str, Any]:
        built.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(AskHumanToolArgs, "model_json_schema", counting)
    steps: list[AgentInfo] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        steps.append(info)
        if len(steps) % 2:  # a bad call, so the model gets a retry step
            return ModelResponse(parts=[ToolCallPart("ask_human", {"urgency": "x"}, "c1")])
        return ModelResponse(parts=[TextPart("done")])

    agent = _agent(FunctionModel(model))
    await agent.run("hi")
    await agent.run("again")
    assert len(steps) >= 4 and len(built) == 1
    first = tool_parameters_schema(AskHumanConfig())
    first["properties"].clear()  # a caller mutating its copy cannot spoil the cache
    assert tool_parameters_schema(AskHumanConfig())["properties"]
    assert steps[-1].function_tools[0].parameters_json_schema["properties"]
