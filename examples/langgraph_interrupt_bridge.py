"""LangGraph ``interrupt()`` answered by people in Slack or Feishu (through askhuman).

A node calls ``interrupt({"ask_human": {...Dify ask_human v1 args...}})``. The bridge
runs the graph; when it stops on such an interrupt, it sends the args to askhuman,
waits for the decision and resumes the graph with ``Command(resume=result)``, where
``result`` is the ``AskHumanToolResult``. The checkpointer keeps the graph's state,
and the idempotency key (thread + interrupt id) makes a restarted bridge pick up the
same request instead of asking again.

Needs: ``pip install langgraph httpx`` (not a test dependency of askhuman), a running
``askhuman serve`` and an API key: ``ASKHUMAN_URL``, ``ASKHUMAN_API_KEY``.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, TypedDict

from askhuman_client import Client as AskHuman
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt


class State(TypedDict, total=False):
    version: str
    decision: dict[str, Any]
    log: str


def plan(state: State) -> State:
    return {"log": f"planned deploy of {state['version']}"}


def approve(state: State) -> State:
    result = interrupt({"ask_human": {
        "title": f"Deploy {state['version']}?",
        "question": f"Deploy {state['version']} to production?",
        "fields": [{"type": "paragraph", "name": "note", "label": "Note"}],
        "actions": [{"id": "approve", "label": "Approve", "style": "primary"},
                    {"id": "reject", "label": "Reject", "style": "destructive"}],
    }})
    return {"decision": result}


def deploy(state: State) -> State:
    decision = state["decision"]
    if decision.get("status") == "submitted" and decision["action"]["id"] == "approve":
        return {"log": f"deployed {state['version']}"}
    return {"log": f"not deployed ({decision.get('status')}: {decision.get('message')})"}


def build_graph() -> Any:
    graph = StateGraph(State)
    graph.add_node("plan", plan)
    graph.add_node("approve", approve)
    graph.add_node("deploy", deploy)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "approve")
    graph.add_edge("approve", "deploy")
    graph.add_edge("deploy", END)
    return graph.compile(checkpointer=InMemorySaver())


def run_with_askhuman(graph: Any, inputs: State, thread_id: str, route: str,
                      askhuman: AskHuman) -> Any:
    """Run until the graph ends, answering every ask_human interrupt through askhuman."""
    config = {"configurable": {"thread_id": thread_id}}
    payload: Any = inputs
    while True:
        output = graph.invoke(payload, config)
        interrupts = output.get("__interrupt__") or []
        pending = [i for i in interrupts if isinstance(i.value, dict) and "ask_human" in i.value]
        if not pending:
            return output
        item = pending[0]
        marker = getattr(item, "id", None) or hashlib.sha256(
            json.dumps(item.value, sort_keys=True).encode()).hexdigest()[:16]
        result = askhuman.ask(route, item.value["ask_human"],
                              idempotency_key=f"langgraph:{thread_id}:{marker}",
                              context={"thread_id": thread_id}, agent_name="langgraph")
        payload = Command(resume=result.model_dump(exclude_none=True))


if __name__ == "__main__":
    with AskHuman(os.environ.get("ASKHUMAN_URL", "http://127.0.0.1:3000"),
                  os.environ["ASKHUMAN_API_KEY"]) as client:
        final = run_with_askhuman(build_graph(), {"version": "v1.2.3"}, "deploy-v1.2.3",
                                  os.environ.get("ASKHUMAN_ROUTE", "ops"), client)
    print(final["log"])
