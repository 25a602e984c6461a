"""Answer an A2A agent's questions through askhuman.

An A2A agent that needs a person puts its task in ``input-required`` and says what it
needs in the status message. ``A2ABridge`` turns that message into a card on an
askhuman route, waits for the answer and sends it back as the next message on the same
task (same ``task_id`` and ``context_id``), for as long as the task keeps asking. It
needs ``a2a-sdk`` (``pip install "askhuman-client[a2a]"``); nothing else in the package
imports this module.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from a2a.client import Client
from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)

from askhuman_client.aio import AsyncClient
from askhuman_client.models import AskHumanResult, HumanRequest

NoAnswer = Literal["tell", "cancel"]

ANSWER_FIELD = "answer"
"""The paragraph field of a card made from a text-only question."""
ASK_KEYS = frozenset({"title", "question", "markdown", "fields", "actions", "urgency"})
QUESTION_CHARS = 1000   # the server's default guardrails for ask_human
MARKDOWN_CHARS = 8000
NO_TEXT = "The agent needs your input to continue."
_RUNNING = frozenset({TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING})


@dataclass
class A2ABridge:
    """Talk to one A2A agent and let people on ``route`` answer its questions.

    ``on_no_answer`` decides what the agent hears when nobody answers (the route's
    timeout, a cancelled or undeliverable request): ``"tell"`` (the default) sends a
    message that says so, with the ``AskHumanToolResult`` as data, and leaves the next
    step to the agent, as askhuman does for its own agents; ``"cancel"`` cancels the
    task instead. After ``max_questions`` questions the task is returned as it is,
    still ``input-required``."""

    agent: Client
    askhuman: AsyncClient
    route: str
    agent_name: str | None = None
    on_no_answer: NoAnswer = "tell"
    max_questions: int = 20
    poll_interval: float = 0.5

    async def send(self, message: Message | str) -> Task | Message:
        """Send ``message`` and answer every question its task asks; the final task
        (or the agent's reply, when it answers with a plain message and no task)."""
        task_id, answer = await self._stream(user_message(message))
        if task_id:
            return await self.resume(await self._settle(task_id))
        if answer is None:
            raise ValueError("the agent answered with neither a task nor a message")
        return answer

    async def resume(self, task: Task) -> Task:
        """Answer ``task`` while it is ``input-required``; the task once it is not.

        An answer is only sent while the task still asks that question: if it moved on
        meanwhile (answered by another client, cancelled), the answer is dropped."""
        for _ in range(self.max_questions):
            if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
                break
            plain = is_plain(task.status.message)
            result = _result(request := await self.ask(task))
            current = await self._settle(task.id)
            if question_key(current) != question_key(task):
                task = current
                continue
            if result.status != "submitted" and self.on_no_answer == "cancel":
                metadata = {"askhuman": result.model_dump(mode="json", exclude_none=True)}
                cancelled: Task = await self.agent.cancel_task(
                    CancelTaskRequest(id=task.id, metadata=metadata))
                return cancelled
            await self._stream(reply(task, request, plain))
            task = await self._settle(task.id)
        return task

    async def ask(self, task: Task) -> HumanRequest:
        """Raise the card for the task's question and wait for its answer. One card per
        question: a bridge restarted on the same task finds its card again; a bridge
        stopped while it waits withdraws the card."""
        created = await self.askhuman.create(
            self.route, question_args(task.status.message), idempotency_key=question_key(task),
            context={"a2a": {"task_id": task.id, "context_id": task.context_id}},
            agent_name=self.agent_name)
        try:
            return await self.askhuman.wait(created.ref)
        except asyncio.CancelledError:
            await asyncio.shield(self.askhuman.cancel(created.ref, "The A2A bridge stopped."))
            raise

    async def _stream(self, message: Message) -> tuple[str, Message | None]:
        """Send one message and read its answer to the end, streamed or not: the task
        it is about, and the agent's message when it answered with one alone."""
        task_id, answer = message.task_id, None
        async for event in self.agent.send_message(SendMessageRequest(message=message)):
            if event.HasField("message"):
                answer = event.message
            task_id = task_id or _task_id(event)
        return task_id, answer

    async def _settle(self, task_id: str) -> Task:
        """The task as the agent stored it, once it stops running: a blocking send
        returns then already; an agent set to return immediately is polled."""
        while True:
            task: Task = await self.agent.get_task(GetTaskRequest(id=task_id))
            if task.status.state not in _RUNNING:
                return task
            await asyncio.sleep(self.poll_interval)


def user_message(message: Message | str) -> Message:
    """A text becomes a user message; a message of the caller's is sent as it is."""
    if isinstance(message, str):
        return Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()),
                       parts=[new_text_part(message)])
    return message


def _task_id(event: StreamResponse) -> str:
    """The task a streamed event is about ("" for a lone message)."""
    if event.HasField("task"):
        return str(event.task.id)
    for kind in ("status_update", "artifact_update"):
        if event.HasField(kind):
            return str(getattr(event, kind).task_id)
    return ""


def _result(request: HumanRequest) -> AskHumanResult:
    assert request.result is not None  # wait() returns resolved requests, with a result
    return request.result


# ------------------------------------------------------------------ the question


def question_args(message: Message) -> dict[str, Any]:
    """The card for an agent's status message. A data part holding Dify ask_human v1
    args is used as it is, so an agent can ask with fields and buttons; otherwise the
    text parts are the question, with an Answer field to type into."""
    for data in get_data_parts(message.parts):
        if _is_ask_args(data):
            return dict(_whole_numbers(data))
    text = "\n".join(get_text_parts(message.parts)).strip() or NO_TEXT
    args: dict[str, Any] = {
        "question": _cut(text, QUESTION_CHARS),
        "fields": [{"type": "paragraph", "name": ANSWER_FIELD, "label": "Answer",
                    "required": True}],
        "actions": [{"id": "send", "label": "Send", "style": "primary"}]}
    if len(text) > QUESTION_CHARS:
        args["markdown"] = _cut(text, MARKDOWN_CHARS)
    return args


def is_plain(message: Message) -> bool:
    """Whether the question is text only, so the card is the bridge's Answer form."""
    return not any(_is_ask_args(data) for data in get_data_parts(message.parts))


def question_key(task: Task) -> str:
    """The idempotency key of the task's current question: its id and status (the
    status message and its timestamp), so the same question never makes two cards and
    a new one always makes its own."""
    status = task.status.SerializeToString(deterministic=True)
    return "a2a-" + hashlib.sha256(task.id.encode() + b"\0" + status).hexdigest()[:48]


def _is_ask_args(data: Any) -> bool:
    return (isinstance(data, dict) and isinstance(data.get("question"), str)
            and set(data) <= ASK_KEYS)


def _whole_numbers(value: Any) -> Any:
    """A data part's numbers all arrive as floats (protobuf ``Value``); the API takes
    whole numbers as integers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    return value


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


# ------------------------------------------------------------------ the answer


def reply(task: Task, request: HumanRequest, plain: bool) -> Message:
    """The next message on the task: the answer in words, and the
    ``AskHumanToolResult`` as a data part for agents that read structure."""
    result = _result(request)
    decider = request.decided_by
    who = (decider.name or decider.user_id) if decider is not None else None
    data = result.model_dump(mode="json", exclude_none=True)
    return Message(
        role=Role.ROLE_USER, message_id=str(uuid.uuid4()), task_id=task.id,
        context_id=task.context_id,
        parts=[new_text_part(answer_text(result, who, plain)), new_data_part(data)],
        metadata={"askhuman": {"ref": request.ref, "status": result.status,
                               "decided_by": who}})


def answer_text(result: AskHumanResult, who: str | None, plain: bool) -> str:
    """The answer as a person would say it. Nobody answering is said as such, never
    dressed up as a choice."""
    if result.status != "submitted":
        why = f" ({result.message})" if result.message else ""
        return (f"No one answered: the request ended as {result.status}{why}. "
                "Nothing was chosen or approved.")
    values = dict(result.values)
    lines: list[str] = []
    if plain:
        lines.append(_say(values.pop(ANSWER_FIELD, "")) or f"{who or 'The person'} sent no text.")
    elif result.action is not None:
        lines.append(f'{who or "The approver"} chose "{result.action.label or result.action.id}".')
    lines += [f"{name}: {_say(value)}" for name, value in values.items()
              if value not in (None, "", [])]
    return "\n".join(lines)


def _say(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
