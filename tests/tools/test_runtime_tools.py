"""Python tools in the embedded runtime: hidden fixed values, validation before approval,
approval rules, the binding check on resume, timeouts, output caps and tool errors."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import TypeAdapter

from bot.agents import AgentSpec, LocalRuntime, ToolBindingError
from bot.askhuman.schema import AskHumanSelectedAction, AskHumanToolResult, timeout_result
from bot.tools.approval import ApprovalTicket
from bot.tools.binding import binding_hash
from bot.tools.config import ToolSettings
from bot.tools.observer import ToolCall, ToolDone
from tests.tools import sample_tools
from tests.tools.scripts import Call, calling

TOOLS = TypeAdapter(list[ToolSettings])


@pytest.fixture(autouse=True)
def _fresh_calls() -> Iterator[None]:
    sample_tools.CALLS.clear()
    yield
    sample_tools.CALLS.clear()


def runtime(tools: list[dict[str, Any]], *steps: list[Call], seen: list[Any] | None = None,
            ask_human: bool = True) -> LocalRuntime:
    spec = AgentSpec(name="ops", model="scripted:deploy",
                     tools=tuple(TOOLS.validate_python(tools)))
    if not ask_human:
        from bot.askhuman.config import AskHumanConfig
        spec = AgentSpec(name="ops", model="scripted:deploy", ask_human=AskHumanConfig(
            enabled=False), tools=spec.tools)
    return LocalRuntime(spec, model=calling(*steps, seen_tools=seen))


SCALE = {"python": "tests.tools.sample_tools:scale", "fixed": {"cluster": "prod-eu"}}


def approve(reason: str | None = None) -> AskHumanToolResult:
    return AskHumanToolResult(status="submitted",
                              action=AskHumanSelectedAction(id="approve", label="Approve"),
                              values={"reason": reason} if reason else {})


def reject(reason: str | None = None) -> AskHumanToolResult:
    return AskHumanToolResult(status="submitted",
                              action=AskHumanSelectedAction(id="reject", label="Reject"),
                              values={"reason": reason} if reason else {})


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    async def started(self, call: ToolCall) -> None:
        self.events.append(("started", call))

    async def finished(self, done: ToolDone) -> None:
        self.events.append(("finished", done))


async def test_fixed_values_are_hidden_from_the_model_and_injected() -> None:
    seen: list[Any] = []
    rt = runtime([{**SCALE, "approval": "never"}],
                 [("scale", {"service": "api", "replicas": "3"})], seen=seen)
    outcome = await rt.run("scale api")
    schema = next(t for t in seen if t.name == "scale").parameters_json_schema
    assert set(schema["properties"]) == {"service", "replicas"}  # no "cluster"
    assert "Scale a service" in next(t for t in seen if t.name == "scale").description
    assert sample_tools.CALLS == [("scale", {"service": "api", "replicas": 3,
                                             "cluster": "prod-eu"})]
    assert outcome.kind == "output"
    assert outcome.output == "scale success: scaled api to 3 on prod-eu"


async def test_the_model_cannot_override_a_fixed_value() -> None:
    rt = runtime([{**SCALE, "approval": "never"}],
                 [("scale", {"service": "api", "replicas": 1, "cluster": "attacker"})])
    outcome = await rt.run("scale api")
    assert sample_tools.CALLS == []
    assert "scale retried" in str(outcome.output) and "cluster" in str(outcome.output)


async def test_bad_arguments_are_a_retry_and_nobody_is_asked() -> None:
    rt = runtime([SCALE], [("scale", {"service": "api", "replicas": "many"})])
    outcome = await rt.run("scale api")
    assert outcome.kind == "output" and not outcome.approvals
    assert "scale retried" in str(outcome.output) and "replicas" in str(outcome.output)
    assert sample_tools.CALLS == []


async def test_approval_request_carries_converted_args_fixed_values_and_binding() -> None:
    rt = runtime([SCALE], [("scale", {"service": "api", "replicas": "5"})])
    outcome = await rt.run("scale api")
    assert outcome.kind == "deferred_call" and outcome.deferred_call is None
    (item,) = outcome.approvals
    assert (item.tool, item.tool_call_id, item.args, item.fixed) == (
        "scale", "c0_0", {"service": "api", "replicas": 5}, {"cluster": "prod-eu"})
    assert "Scale a service" in item.description
    assert item.binding == binding_hash("scale", {"service": "api", "replicas": "5"},
                                        {"cluster": "prod-eu"})
    assert outcome.snapshot["pending_approvals"] == ["c0_0"]
    assert sample_tools.CALLS == []


async def test_approve_runs_once_reject_passes_the_reason_and_never_runs() -> None:
    rt = runtime([SCALE], [("scale", {"service": "api", "replicas": 5})])
    asked = await rt.run("scale api")
    ticket = {"c0_0": ApprovalTicket(asked.approvals[0].binding, 60)}
    recorder = Recorder()
    done = await rt.resume(asked.snapshot, {"c0_0": approve()}, tickets=ticket, observer=recorder)
    assert sample_tools.CALLS == [("scale", {"service": "api", "replicas": 5,
                                             "cluster": "prod-eu"})]
    assert done.output == "scale success: scaled api to 5 on prod-eu"
    kinds = [kind for kind, _ in recorder.events]
    assert kinds == ["started", "finished"]
    finished = recorder.events[1][1]
    assert finished.ok and finished.call.binding == asked.approvals[0].binding
    assert finished.line == "Ran scale(service=api, replicas=5): ok"

    sample_tools.CALLS.clear()
    denied = await rt.resume(asked.snapshot, {"c0_0": reject("not during the freeze")},
                             tickets=ticket)
    assert sample_tools.CALLS == []
    assert denied.output == ("scale denied: The reviewer rejected this call: not during the "
                             "freeze The action was not run.")


async def test_timeout_never_runs_and_says_how_long_it_waited() -> None:
    rt = runtime([SCALE], [("scale", {"service": "api", "replicas": 5})])
    asked = await rt.run("scale api")
    ticket = {"c0_0": ApprovalTicket(asked.approvals[0].binding, 1800)}
    done = await rt.resume(asked.snapshot, {"c0_0": timeout_result()}, tickets=ticket)
    assert sample_tools.CALLS == []
    assert done.output == "scale denied: No approval within 30m; the action was not run."


@pytest.mark.parametrize("tamper", ["args", "tool", "fixed"])
async def test_a_call_changed_after_approval_never_runs(tamper: str) -> None:
    rt = runtime([SCALE, {"python": "tests.tools.sample_tools:chatty"}],
                 [("scale", {"service": "api", "replicas": 2})])
    asked = await rt.run("scale api")
    ticket = {"c0_0": ApprovalTicket(asked.approvals[0].binding, 5)}
    snapshot = copy.deepcopy(asked.snapshot)
    call = snapshot["messages"][-1]["parts"][0]  # type: ignore[index]
    if tamper == "args":
        call["args"] = {"service": "api", "replicas": 200}
    elif tamper == "tool":
        call["tool_name"] = "chatty"
        call["args"] = {}
    else:
        tools = [{**SCALE, "fixed": {"cluster": "us-east"}}]
        rt = runtime(tools, [("scale", {"service": "api", "replicas": 2})])
    with pytest.raises(ToolBindingError) as caught:
        await rt.resume(snapshot, {"c0_0": approve()}, tickets=ticket)
    assert caught.value.tool_call_id == "c0_0"
    assert sample_tools.CALLS == []


async def test_when_rule_runs_below_the_threshold_and_asks_above() -> None:
    rule = {**SCALE, "approval": {"when": "args.replicas > 3 || args.cluster != 'prod-eu'"}}
    small = await runtime([rule], [("scale", {"service": "api", "replicas": 2})]).run("x")
    assert small.kind == "output" and len(sample_tools.CALLS) == 1
    big = await runtime([rule], [("scale", {"service": "api", "replicas": 4})]).run("x")
    assert big.kind == "deferred_call" and [a.args["replicas"] for a in big.approvals] == [4]
    assert len(sample_tools.CALLS) == 1


async def test_a_rule_that_errors_asks_rather_than_runs() -> None:
    rule = {**SCALE, "approval": {"when": "args.nonexistent > 3"}}
    outcome = await runtime([rule], [("scale", {"service": "api", "replicas": 1})]).run("x")
    assert outcome.kind == "deferred_call" and sample_tools.CALLS == []


async def test_two_approvals_and_an_ask_human_in_one_step_resume_together() -> None:
    question = {"question": "Which window?", "fields": [
        {"type": "paragraph", "name": "window", "label": "Window"}]}
    rt = runtime([SCALE], [("scale", {"service": "api", "replicas": 4}),
                           ("scale", {"service": "web", "replicas": 6}),
                           ("ask_human", question)])
    asked = await rt.run("x")
    assert [a.tool_call_id for a in asked.approvals] == ["c0_0", "c0_1"]
    assert asked.deferred_call is not None and asked.deferred_call.tool_call_id == "c0_2"
    tickets = {a.tool_call_id: ApprovalTicket(a.binding, 1) for a in asked.approvals}
    answer = AskHumanToolResult(status="submitted", values={"window": "tonight"},
                                action=AskHumanSelectedAction(id="submit", label="Submit"))
    with pytest.raises(Exception, match="must answer"):
        await rt.resume(asked.snapshot, {"c0_0": approve()}, tickets=tickets)
    done = await rt.resume(asked.snapshot, {"c0_0": approve(), "c0_1": reject(),
                                            "c0_2": answer}, tickets=tickets)
    assert [c[1]["service"] for c in sample_tools.CALLS] == ["api"]
    lines = str(done.output).splitlines()
    assert lines[0] == "scale success: scaled api to 4 on prod-eu"
    assert lines[1] == "scale denied: The reviewer rejected this call; the action was not run."
    assert lines[2].startswith("ask_human success:") and "tonight" in lines[2]


async def test_a_hung_tool_times_out_with_an_error_for_the_model() -> None:
    rt = runtime([{"python": "tests.tools.sample_tools:hang", "approval": "never",
                   "timeout": 0.3}], [("hang", {})])
    recorder = Recorder()
    outcome = await rt.run("x", observer=recorder)
    assert outcome.output == ("hang failed: hang did not finish within 0.3s and was stopped; "
                              "whether it took effect is unknown.")
    assert [k for k, _ in recorder.events] == ["started", "finished"]
    assert recorder.events[1][1].error == "timed out"


async def test_chatty_output_is_capped_with_a_visible_marker() -> None:
    rt = runtime([{"python": "tests.tools.sample_tools:chatty", "approval": "never",
                   "max_output_chars": 200}], [("chatty", {"size": 5000})])
    outcome = await rt.run("x")
    text = str(outcome.output)
    assert text.startswith("chatty success: " + "y" * 200)
    assert text.endswith("… [output truncated: 4800 more characters]")


async def test_a_failing_tool_is_a_tool_error_for_the_model_not_a_crash() -> None:
    rt = runtime([{"python": "tests.tools.sample_tools:explode", "approval": "never"}],
                 [("explode", {"message": "disk full"})])
    recorder = Recorder()
    outcome = await rt.run("x", observer=recorder)
    assert outcome.output == "explode failed: explode failed: RuntimeError: disk full"
    assert recorder.events[1][1].line == ("Ran explode(message=disk full): error: "
                                          "RuntimeError: disk full")


async def test_async_tool_with_structured_output_and_date_conversion() -> None:
    rt = runtime([{"python": "tests.tools.sample_tools:deploy", "approval": "never"}],
                 [("deploy", {"version": "v1", "when": "2025-01-02"})])
    outcome = await rt.run("x")
    assert outcome.output == 'deploy success: {"deployed": "v1", "on": "2025-01-02"}'
