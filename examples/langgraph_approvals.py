"""A LangChain agent whose risky tool waits for a person in Slack or Feishu.

``create_agent`` with ``HumanInTheLoopMiddleware`` pauses before ``send_email`` runs;
``hitl_resume_sync`` posts an approval card through askhuman (Approve, Edit and approve,
Reject with a reason) and returns the ``Command`` that resumes the agent with the
person's decision. A plain ``interrupt("...")`` in your own node works the same way
with ``ask_resume_sync`` (see ``release_notes`` below).

Runs without model keys: the model is langchain_core's fake chat model replaying one
tool call. For a real model, pass ``"openai:gpt-5"`` (or any ``init_chat_model`` name)
to ``build_agent``.

    pip install "askhuman-client[langgraph]"
    ASKHUMAN_URL=http://127.0.0.1:3000 ASKHUMAN_API_KEY=ahk_… ASKHUMAN_ROUTE=ops \\
        python examples/langgraph_approvals.py
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, TypedDict

from askhuman_client import Client
from askhuman_client.langgraph import ask_resume_sync, hitl_resume_sync
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import interrupt


@tool
def send_email(to: str, subject: str) -> str:
    """Send an email."""
    return f"sent {subject!r} to {to}"


class OfflineModel(GenericFakeChatModel):
    """The fake model replays its messages; create_agent also needs bind_tools."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> OfflineModel:
        return self


def offline_model() -> OfflineModel:
    call = {"name": "send_email", "args": {"to": "ann@example.com", "subject": "Q3 numbers"},
            "id": "call_1"}
    return OfflineModel(messages=iter([AIMessage("", tool_calls=[call]),
                                       AIMessage("Done: the email step is finished.")]))


def build_agent(model: Any = None) -> Any:
    return create_agent(model or offline_model(), tools=[send_email],
                        middleware=[HumanInTheLoopMiddleware({"send_email": True})],
                        checkpointer=InMemorySaver())


def run_agent(client: Client, route: str, agent: Any = None) -> list[Any]:
    """Run until the agent finishes, asking askhuman at every pause."""
    agent = agent or build_agent()
    config = {"configurable": {"thread_id": "example"}}
    result = agent.invoke({"messages": [{"role": "user", "content": "Mail Ann the Q3 numbers"}]},
                          config, version="v2")
    while result.interrupts:
        result = agent.invoke(hitl_resume_sync(client, result, route=route), config,
                              version="v2")
    return list(result.value["messages"])


class Notes(TypedDict, total=False):
    notes: dict[str, Any]


def ask_notes(state: Notes) -> Notes:
    return {"notes": interrupt("Anything to add to the release notes?")}


def release_notes(client: Client, route: str) -> dict[str, Any]:
    """A plain interrupt in your own node: the person's AskHumanToolResult comes back."""
    graph = StateGraph(Notes)
    graph.add_node(ask_notes)
    graph.add_edge(START, "ask_notes")
    app = graph.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "notes"}}
    result = app.invoke({}, config, version="v2")
    result = app.invoke(ask_resume_sync(client, result, route=route), config, version="v2")
    return dict(result.value["notes"])


def main() -> None:
    route = os.environ.get("ASKHUMAN_ROUTE", "ops")
    url = os.environ.get("ASKHUMAN_URL", "http://127.0.0.1:3000")
    with Client(url, os.environ["ASKHUMAN_API_KEY"]) as client:
        for message in run_agent(client, route):
            print(f"{type(message).__name__}: {message.content}")
        print("release notes:", release_notes(client, route))


if __name__ == "__main__":
    main()
