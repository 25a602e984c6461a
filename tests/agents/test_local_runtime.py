"""End-to-end runs of the embedded runtime with pydantic-ai FunctionModel agents."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from bot.agents import (
    AgentRuntimeError,
    AgentSpec,
    LocalRuntime,
    Outcome,
    ResumeMismatchError,
    UnknownModelError,
    build_runtime,
)
from bot.askhuman.config import AskHumanConfig
from bot.askhuman.schema import (
    AskHumanSelectedAction,
    AskHumanToolArgs,
    AskHumanToolResult,
    timeout_result,
)


def _json_roundtrip(snapshot: dict[str, Any]) -> dict[str, Any]:
    """What storage does: the snapshot must survive plain JSON."""
    return json.loads(json.dumps(snapshot))


def _submitted(action: str, **values: Any) -> AskHumanToolResult:
    return AskHumanToolResult(
        status="submitted",
        action=AskHumanSelectedAction(id=action, label=action.title()),
        values=values,
    )


async def _resume(runtime: LocalRuntime, outcome: Outcome, result: AskHumanToolResult) -> Outcome:
    assert outcome.deferred_call is not None
    return await runtime.resume(
        _json_roundtrip(outcome.snapshot), {outcome.deferred_call.tool_call_id: result}
    )


@pytest.fixture
def deploy() -> LocalRuntime:
    return LocalRuntime(AgentSpec(name="deploy", model="scripted:deploy"))


async def test_ask_then_submitted_gives_final_output(deploy: LocalRuntime) -> None:
    asked = await deploy.run("Deploy v2.3.1")
    assert asked.kind == "deferred_call" and asked.deferred_call is not None
    call = asked.deferred_call
    assert call.metadata == {
        "layer_type": "dify.ask_human",
        "tool_name": "ask_human",
        "schema_version": 1,
    }
    args = AskHumanToolArgs.model_validate(call.args)
    assert [f.name for f in args.fields] == ["environment", "comment"]
    assert [a.id for a in args.actions] == ["approve", "reject"]
    assert asked.snapshot["pending_tool_call_id"] == call.tool_call_id

    done = await _resume(deploy, asked, _submitted("approve", environment="production"))
    assert done.kind == "output"
    assert done.output == "Deployed v2.3.1 to production. Health checks are green."
    assert done.snapshot["pending_tool_call_id"] is None


async def test_reject_and_timeout_get_different_answers(deploy: LocalRuntime) -> None:
    asked = await deploy.run("Deploy v2.3.1")
    rejected = await _resume(deploy, asked, _submitted("reject", comment="freeze week"))
    timed_out = await _resume(deploy, asked, timeout_result())
    assert rejected.output == (
        "Deployment of v2.3.1 cancelled: the reviewer rejected it. Reviewer note: freeze week"
    )
    assert isinstance(timed_out.output, str) and "arrived in time" in timed_out.output


async def test_second_ask_after_resume() -> None:
    runtime = LocalRuntime(AgentSpec(name="release", model="scripted:release"))
    first = await runtime.run("Release 1.4.0")
    second = await _resume(runtime, first, _submitted("approve", environment="staging"))
    assert second.kind == "deferred_call" and second.deferred_call is not None
    assert second.deferred_call.tool_call_id != first.deferred_call.tool_call_id  # type: ignore[union-attr]
    final = await _resume(runtime, second, _submitted("submit", notes="Faster builds"))
    assert final.output == "Released 1.4.0. Notes published: Faster builds"


async def test_resume_with_dify_timeout_result() -> None:
    runtime = LocalRuntime(AgentSpec(name="release", model="scripted:release"))
    first = await runtime.run("Release 1.4.0")
    second = await _resume(runtime, first, _submitted("approve"))
    final = await _resume(runtime, second, timeout_result())
    assert final.output == "Released 1.4.0. Notes published: (no notes: timeout)"


async def test_the_model_sees_the_result_verbatim(deploy: LocalRuntime) -> None:
    seen: list[Any] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        from pydantic_ai.messages import ModelRequest, ToolReturnPart

        for message in messages:
            if isinstance(message, ModelRequest):
                seen.extend(p.content for p in message.parts if isinstance(p, ToolReturnPart))
        if seen:
            return ModelResponse(parts=[TextPart("ok")])
        return ModelResponse(
            parts=[ToolCallPart("ask_human", {"question": "Q?"}, tool_call_id="q")]
        )

    runtime = LocalRuntime(AgentSpec(name="t", model="scripted:deploy"), model=FunctionModel(model))
    asked = await runtime.run("hi")
    await _resume(runtime, asked, timeout_result())
    assert seen == [timeout_result().model_dump(mode="json")]


async def test_mismatched_tool_call_id(deploy: LocalRuntime) -> None:
    asked = await deploy.run("Deploy v1.0")
    with pytest.raises(ResumeMismatchError, match="must answer tool_call_id 'deploy_approval_1'"):
        await deploy.resume(asked.snapshot, {"zzz": timeout_result()})


async def test_resume_of_finished_run_is_refused(deploy: LocalRuntime) -> None:
    done = await _resume(deploy, await deploy.run("Deploy v1.0"), timeout_result())
    with pytest.raises(ResumeMismatchError, match="no pending ask_human call"):
        await deploy.resume(done.snapshot, {"deploy_approval_1": timeout_result()})


async def test_snapshot_from_another_agent_is_refused(deploy: LocalRuntime) -> None:
    other = LocalRuntime(AgentSpec(name="release", model="scripted:release"))
    asked = await other.run("Release 2.0")
    with pytest.raises(AgentRuntimeError, match="belongs to agent 'release'"):
        await deploy.resume(asked.snapshot, {"release_approval_1": timeout_result()})


async def test_blank_prompt_is_refused(deploy: LocalRuntime) -> None:
    with pytest.raises(AgentRuntimeError, match=r"run\.user_prompts must not be empty"):
        await deploy.run("  ")


@pytest.mark.parametrize(
    ("model_id", "error", "message"),
    [
        ("gpt-4o", UnknownModelError, "unknown model id 'gpt-4o'"),
        ("nope:model", UnknownModelError, "scripted:deploy"),
        ("scripted:missing", UnknownModelError, "unknown scripted model 'scripted:missing'"),
    ],
)
def test_unknown_model_ids(model_id: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        build_runtime(AgentSpec(name="x", model=model_id))


def test_real_provider_without_key_says_which_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(AgentRuntimeError, match="OPENAI_API_KEY"):
        build_runtime(AgentSpec(name="x", model="openai:gpt-4o"))


def test_real_provider_with_key_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    runtime = build_runtime(AgentSpec(name="x", model="openai:gpt-4o"))
    assert runtime.name == "x"


async def test_invalid_model_args_retry_inside_a_run() -> None:
    calls: list[dict[str, Any]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        args = {"question": "Q?", "fields": [{"type": "number", "name": "n", "label": "N"}]}
        if calls:  # second attempt drops the disallowed field
            args = {"question": "Q?"}
        calls.append(args)
        return ModelResponse(parts=[ToolCallPart("ask_human", args, tool_call_id=f"c{len(calls)}")])

    runtime = LocalRuntime(AgentSpec(name="t", model="scripted:deploy"), model=FunctionModel(model))
    asked = await runtime.run("go")
    assert len(calls) == 2 and asked.deferred_call is not None
    assert asked.deferred_call.tool_call_id == "c2"


async def test_two_calls_in_one_turn_fail_the_run() -> None:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(
            parts=[
                ToolCallPart("ask_human", {"question": "A?"}, tool_call_id="a"),
                ToolCallPart("ask_human", {"question": "B?"}, tool_call_id="b"),
            ]
        )

    runtime = LocalRuntime(AgentSpec(name="t", model="scripted:deploy"), model=FunctionModel(model))
    with pytest.raises(AgentRuntimeError, match="exactly one deferred call per run"):
        await runtime.run("go")


async def test_disabled_ask_human_runs_plain() -> None:
    runtime = LocalRuntime(
        AgentSpec(name="t", model="scripted:deploy", ask_human=AskHumanConfig(enabled=False)),
        model=FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("done")])),
    )
    outcome = await runtime.run("go")
    assert (outcome.kind, outcome.output) == ("output", "done")


def _without_run_ids(snapshot: dict[str, Any]) -> Any:
    """A snapshot's messages without what differs between any two runs."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items()
                    if k not in ("timestamp", "run_id", "conversation_id")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(_json_roundtrip(snapshot)["messages"])


@pytest.mark.parametrize("result", [_submitted("approve", environment="production"),
                                    _submitted("reject", comment="not today"),
                                    timeout_result()])
async def test_answer_as_tool_return_gives_the_deferred_results_run(
    deploy: LocalRuntime, result: AskHumanToolResult,
) -> None:
    """The resume closes the lone ask_human call itself (one graph step less); the model
    sees exactly what pydantic-ai's own ``DeferredToolResults`` handling gives it."""
    from pydantic_ai import DeferredToolResults

    from bot.agents.snapshot import dump_snapshot, load_messages
    from bot.tools.observer import ToolDeps

    asked = await deploy.run("Deploy v2.3.1")
    assert asked.deferred_call is not None
    call_id = asked.deferred_call.tool_call_id
    snapshot = _json_roundtrip(asked.snapshot)
    fast = await deploy.resume(dict(snapshot), {call_id: result})
    reference = await deploy._agent.run(
        None, message_history=load_messages(snapshot, "deploy"), deps=ToolDeps(None),
        deferred_tool_results=DeferredToolResults(calls={call_id: result.model_dump(
            mode="json")}))
    assert fast.kind == "output" and fast.output == reference.output
    expected = dump_snapshot("deploy", reference.all_messages(), None)
    assert _without_run_ids(fast.snapshot) == _without_run_ids(expected)
    assert len(fast.snapshot["messages"]) == 4  # type: ignore[arg-type]
