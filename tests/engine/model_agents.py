"""Real pydantic-ai agents on ``FunctionModel`` for engine tests (no network).

``model_runtime(reply)`` builds the embedded ``LocalRuntime`` around a function model:
the first model call asks a human (``ask_human`` with a simple approve/reject card),
every later call is answered by the async ``reply(messages)``, which may sleep (a slow
model) or raise (a provider error).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from bot.agents import AgentSpec, LocalRuntime
from bot.askhuman.config import AskHumanConfig
from tests.engine.helpers import FakeClock

ASK_ARGS: dict[str, Any] = {
    "question": "Ship it?",
    "actions": [{"id": "approve", "label": "Approve"}, {"id": "reject", "label": "Reject"}],
}
Reply = Callable[[list[ModelMessage]], Awaitable[str]]


def model_runtime(reply: Reply, *, fail_first: BaseException | None = None) -> LocalRuntime:
    """The ``form`` agent on a FunctionModel: asks once, then ``reply`` answers.

    ``fail_first`` makes the very first model call raise (the run fails at once).
    """
    calls = {"n": 0}

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls["n"] += 1
        if calls["n"] == 1:
            if fail_first is not None:
                raise fail_first
            return ModelResponse(parts=[ToolCallPart("ask_human", ASK_ARGS,
                                                     tool_call_id="call_1")])
        return ModelResponse(parts=[TextPart(await reply(messages))])

    spec = AgentSpec(name="form", model="function", ask_human=AskHumanConfig())
    return LocalRuntime(spec, model=FunctionModel(model))


class RealClock(FakeClock):
    """The wall clock, for tests where leases must really run out."""

    def __call__(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)
