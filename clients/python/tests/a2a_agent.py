"""A scripted A2A agent for the bridge's tests: a real a2a-sdk server (its
``DefaultRequestHandler``, ``InMemoryTaskStore`` and JSON-RPC routes) served by uvicorn
on loopback, in a thread of the test process.

Each script is named by the first message's text and lists the status messages the
agent asks with, one ``input-required`` each; the agent completes when its questions
are spent. Everything it was told on a task is kept in ``seen``, so a test checks what
the agent really received, not what the bridge meant to send."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import uvicorn
from a2a.helpers import (
    get_message_text,
    new_task_from_user_message,
    new_text_message,
    new_text_part,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
)
from starlette.applications import Starlette


@dataclass
class ScriptedAgent(AgentExecutor):  # type: ignore[misc]  # a2a-sdk is untyped for mypy here
    """Asks its script's questions in order, then completes with the last answer."""

    scripts: dict[str, list[list[Part]]] = field(default_factory=dict)
    """First message's text → the status messages to ask with; ``[]`` answers with a
    lone message and no task."""
    seen: dict[str, list[Message]] = field(default_factory=dict)
    """Task id → the messages that answered its questions, in order."""
    started: dict[str, str] = field(default_factory=dict)
    """First message's text → the id of the task it started."""
    cancelled: list[str] = field(default_factory=list)
    working: dict[str, float] = field(default_factory=dict)
    """First message's text → seconds the task works before its first question."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            prompt = context.get_user_input()
            if not self.scripts[prompt]:
                await event_queue.enqueue_event(new_text_message(f"{prompt} to you too"))
                return
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
            self.started[prompt], self.seen[task.id] = task.id, []
        else:
            self.seen[task.id].append(context.message)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        prompt = next(p for p, t in self.started.items() if t == task.id)
        script, answers = self.scripts[prompt], self.seen[task.id]
        if not answers and prompt in self.working:
            await updater.start_work()
            await asyncio.sleep(self.working[prompt])
        if len(answers) < len(script):
            await updater.requires_input(updater.new_agent_message(script[len(answers)]))
            return
        last = get_message_text(answers[-1]) if answers else ""
        await updater.complete(updater.new_agent_message([new_text_part(f"done: {last}")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.cancelled.append(str(context.task_id))
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def agent_card(url: str) -> AgentCard:
    return AgentCard(
        name="deployer", description="Deploys releases when a person agrees.", version="1.0",
        supported_interfaces=[AgentInterface(protocol_binding="JSONRPC", url=url + "/",
                                             protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[AgentSkill(id="deploy", name="deploy", description="Deploy a release",
                           tags=["deploy"])])


@contextmanager
def served(agent: ScriptedAgent) -> Iterator[str]:
    """Serve ``agent`` on a free loopback port; its base URL. Stopped and joined on exit."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    card = agent_card(url)
    handler = DefaultRequestHandler(agent_executor=agent, task_store=InMemoryTaskStore(),
                                    agent_card=card)
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the A2A agent server did not start")
            time.sleep(0.01)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
