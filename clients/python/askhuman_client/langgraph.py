"""Answer LangGraph interrupts from Slack or Feishu: ``pip install "askhuman-client[langgraph]"``.

Two kinds of pause, two helpers, each returning the ``Command(resume=...)`` to continue:

- ``hitl_resume``: the interrupts of LangChain's ``HumanInTheLoopMiddleware`` (batched
  or per_call). Each tool call becomes an approval card; the answers come back as the
  decisions the middleware expects, in order.
- ``ask_resume``: a plain ``interrupt(value)`` in your own node (Dify ask_human args, or
  a question string). The person's ``AskHumanToolResult`` (as a dict) is the resume value.

::

    result = await agent.ainvoke(inputs, config, version="v2")
    while result.interrupts:
        command = await hitl_resume(client, result, route="ops")
        result = await agent.ainvoke(command, config, version="v2")

Every card's idempotency key is derived from the interrupt's id, so asking again about
the same pause (after a crash, or from another worker) finds the same card and its
answer rather than posting a second one. Resumes are keyed by interrupt id, so graphs
with several pending interrupts resume in one call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from langgraph.types import Command, Interrupt

from askhuman_client._langgraph_reviews import (
    Decision,
    DecisionNotAllowed,
    Review,
    answer_args,
    approval_fields,
    decision_of,
    is_batched,
    is_hitl,
    key_for,
    reviews_of,
)
from askhuman_client.aio import AsyncClient
from askhuman_client.client import Client
from askhuman_client.models import HumanRequest

__all__ = [
    "Decision", "DecisionNotAllowed", "ask_interrupt", "ask_interrupt_sync", "ask_resume",
    "ask_resume_sync", "hitl_decisions", "hitl_decisions_sync", "hitl_resume",
    "hitl_resume_sync", "pending_interrupts",
]


def pending_interrupts(source: Any) -> list[Interrupt]:
    """The interrupts in what a graph gave you: ``invoke(..., version="v2")``'s output,
    a v1 output dict (``"__interrupt__"``), ``get_state(config)``, an ``Interrupt`` or
    a list of them."""
    if isinstance(source, Interrupt):
        return [source]
    if isinstance(source, Mapping):
        return list(source.get("__interrupt__", ()))
    found = getattr(source, "interrupts", None)
    return list(source if found is None else found)


@dataclass(frozen=True)
class _Where:
    """Where the cards go and what each carries besides the question."""

    route: str
    context: dict[str, Any] | None = None
    agent_name: str | None = None
    answer_tools: frozenset[str] = frozenset()

    def extra(self) -> dict[str, Any]:
        return {"context": self.context, "agent_name": self.agent_name}


def _parts(interrupt: Any) -> tuple[Any, Any, str | None]:
    """Value, response schema and id of an ``Interrupt``; a bare value has neither."""
    if isinstance(interrupt, Interrupt):  # response_schema is new in langgraph 1.2
        return interrupt.value, getattr(interrupt, "response_schema", None), interrupt.id
    return interrupt, None, None


def _of_kind(source: Any, hitl: bool) -> list[Interrupt]:
    """The pending interrupts, all of the kind this helper answers (else a clear error
    rather than a card that makes no sense)."""
    interrupts = pending_interrupts(source)
    if not interrupts:
        raise ValueError("nothing to resume: the graph has no pending interrupt")
    other = [i.id for i in interrupts if is_hitl(i.value) != hitl]
    if other:
        helper = "ask_resume" if hitl else "hitl_resume"
        raise ValueError(f"interrupts {other} are not for this helper; use {helper}")
    return interrupts


def _grouped(interrupts: list[Interrupt]) -> list[tuple[Interrupt, list[Review]]]:
    return [(i, reviews_of(*_parts(i))) for i in interrupts]


def _resume(groups: list[tuple[Interrupt, list[Review]]], decisions: list[Decision]) -> Command:
    """One resume value per interrupt id: ``{"decisions": [...]}`` for a batched
    request, the single decision for a per-call one."""
    answers: dict[str, Any] = {}
    remaining = iter(decisions)
    for interrupt, reviews in groups:
        mine = [next(remaining) for _ in reviews]
        answers[interrupt.id] = {"decisions": mine} if is_batched(interrupt.value) else mine[0]
    return Command(resume=answers)


def _ask_args(value: Any) -> dict[str, Any]:
    """Dify ask_human v1 args from an interrupt value: a dict as is, a string as the
    question."""
    if isinstance(value, str):
        return {"question": value}
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"an interrupt value to ask about must be ask_human args (a dict) or a "
                    f"question (a str), not {type(value).__name__}")


def _result(request: HumanRequest) -> dict[str, Any]:
    assert request.result is not None  # a resolved request always carries its result
    return request.result.model_dump(mode="json", exclude_none=True)


# --- async -----------------------------------------------------------------------------

async def _send(client: AsyncClient, review: Review, where: _Where) -> HumanRequest:
    if review.by_answer(where.answer_tools):
        return await client.create(where.route, answer_args(review),
                                   idempotency_key=review.key, **where.extra())
    return await client.request_approval(where.route, **approval_fields(review), **where.extra())


async def _decide(client: AsyncClient, reviews: list[Review], where: _Where) -> list[Decision]:
    """Post every card first, in order (the approver sees them all at once), then wait."""
    created = [await _send(client, review, where) for review in reviews]
    resolved = await asyncio.gather(*(client.wait(request.ref) for request in created))
    return [decision_of(review, request) for review, request in zip(reviews, resolved, strict=True)]


async def hitl_decisions(client: AsyncClient, interrupt: Any, *, route: str,
                         context: dict[str, Any] | None = None, agent_name: str | None = None,
                         answer_tools: Collection[str] = ()) -> list[Decision]:
    """One decision per tool call of a ``HumanInTheLoopMiddleware`` interrupt, in order.

    ``interrupt`` is the ``Interrupt`` (needed in per_call mode, whose allowed decisions
    are in its ``response_schema``) or a batched value. ``answer_tools``: tools whose
    card asks for a typed answer (→ ``respond``) even when they allow approve.
    Raises ``DecisionNotAllowed`` if an answer maps to a decision the config forbids.
    """
    value, schema, interrupt_id = _parts(interrupt)
    where = _Where(route, context, agent_name, frozenset(answer_tools))
    return await _decide(client, reviews_of(value, schema, interrupt_id), where)


async def hitl_resume(client: AsyncClient, source: Any, *, route: str,
                      context: dict[str, Any] | None = None, agent_name: str | None = None,
                      answer_tools: Collection[str] = ()) -> Command:
    """Ask about every pending ``HumanInTheLoopMiddleware`` interrupt in ``source`` and
    return the ``Command`` that resumes them all (see ``pending_interrupts``)."""
    groups = _grouped(_of_kind(source, hitl=True))
    where = _Where(route, context, agent_name, frozenset(answer_tools))
    return _resume(groups, await _decide(client, [r for _, rs in groups for r in rs], where))


async def ask_interrupt(client: AsyncClient, interrupt: Any, *, route: str,
                        context: dict[str, Any] | None = None,
                        agent_name: str | None = None) -> dict[str, Any]:
    """Ask a person what a plain ``interrupt(value)`` asks; returns the
    ``AskHumanToolResult`` as a dict (also at a timeout: ``status == "timeout"``)."""
    value, _, interrupt_id = _parts(interrupt)
    request = await client.create(route, _ask_args(value), idempotency_key=key_for(
        interrupt_id, 0), context=context, agent_name=agent_name)
    return _result(await client.wait(request.ref))


async def ask_resume(client: AsyncClient, source: Any, *, route: str,
                     context: dict[str, Any] | None = None,
                     agent_name: str | None = None) -> Command:
    """Ask about every pending plain interrupt; the ``Command`` resumes each with its
    person's ``AskHumanToolResult`` dict."""
    interrupts = _of_kind(source, hitl=False)
    created = [await client.create(route, _ask_args(i.value), idempotency_key=key_for(i.id, 0),
                                   context=context, agent_name=agent_name) for i in interrupts]
    resolved = await asyncio.gather(*(client.wait(request.ref) for request in created))
    return Command(resume={i.id: _result(r) for i, r in zip(interrupts, resolved, strict=True)})


# --- sync: the same, blocking, for graphs run with invoke() ------------------------------

def _send_sync(client: Client, review: Review, where: _Where) -> HumanRequest:
    if review.by_answer(where.answer_tools):
        return client.create(where.route, answer_args(review), idempotency_key=review.key,
                             **where.extra())
    return client.request_approval(where.route, **approval_fields(review), **where.extra())


def _decide_sync(client: Client, reviews: list[Review], where: _Where) -> list[Decision]:
    created = [_send_sync(client, review, where) for review in reviews]
    resolved = [client.wait(request.ref) for request in created]
    return [decision_of(review, request) for review, request in zip(reviews, resolved, strict=True)]


def hitl_decisions_sync(client: Client, interrupt: Any, *, route: str,
                        context: dict[str, Any] | None = None, agent_name: str | None = None,
                        answer_tools: Collection[str] = ()) -> list[Decision]:
    """The blocking twin of :func:`hitl_decisions`."""
    value, schema, interrupt_id = _parts(interrupt)
    where = _Where(route, context, agent_name, frozenset(answer_tools))
    return _decide_sync(client, reviews_of(value, schema, interrupt_id), where)


def hitl_resume_sync(client: Client, source: Any, *, route: str,
                     context: dict[str, Any] | None = None, agent_name: str | None = None,
                     answer_tools: Collection[str] = ()) -> Command:
    """The blocking twin of :func:`hitl_resume`."""
    groups = _grouped(_of_kind(source, hitl=True))
    where = _Where(route, context, agent_name, frozenset(answer_tools))
    return _resume(groups, _decide_sync(client, [r for _, rs in groups for r in rs], where))


def ask_interrupt_sync(client: Client, interrupt: Any, *, route: str,
                       context: dict[str, Any] | None = None,
                       agent_name: str | None = None) -> dict[str, Any]:
    """The blocking twin of :func:`ask_interrupt`."""
    value, _, interrupt_id = _parts(interrupt)
    request = client.create(route, _ask_args(value), idempotency_key=key_for(interrupt_id, 0),
                            context=context, agent_name=agent_name)
    return _result(client.wait(request.ref))


def ask_resume_sync(client: Client, source: Any, *, route: str,
                    context: dict[str, Any] | None = None,
                    agent_name: str | None = None) -> Command:
    """The blocking twin of :func:`ask_resume`."""
    interrupts = _of_kind(source, hitl=False)
    created = [client.create(route, _ask_args(i.value), idempotency_key=key_for(i.id, 0),
                             context=context, agent_name=agent_name) for i in interrupts]
    resolved = [client.wait(request.ref) for request in created]
    return Command(resume={i.id: _result(r) for i, r in zip(interrupts, resolved, strict=True)})
