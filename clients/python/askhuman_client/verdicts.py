"""One tool call's human decision, in the terms every agent framework needs.

Each framework integration asks askhuman the same thing (may this tool run with these
arguments?) and needs the same four facts back: run it or not, with which arguments,
whether a person changed them, and what to tell the model. Reading those from a
resolved approval lives here once, so LangGraph, the OpenAI Agents SDK, ADK,
pydantic-ai and A2A all tell the model the same truthful story.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

import httpx

from askhuman_client.aio import AsyncClient
from askhuman_client.client import Client
from askhuman_client.errors import AskHumanError
from askhuman_client.models import HumanRequest

__all__ = ["WITHDRAWN", "Verdict", "approve_call", "approve_call_sync", "settle", "verdict_of"]


@dataclass(frozen=True)
class Verdict:
    """What a person decided about one tool call.

    ``args`` are the arguments to run: the model's own, or the approver's edit.
    ``message`` is what the model should read when the call does not run (the
    approver's reason, or why nobody decided), and a short note when it runs edited.
    """

    approved: bool
    args: dict[str, Any]
    edited: bool
    message: str
    status: str
    decided_by: str | None
    request: HumanRequest


def _who(request: HumanRequest) -> str | None:
    decider = request.decided_by
    if decider is None:
        return None
    return decider.name or decider.user_id


def _refusal(request: HumanRequest, who: str | None) -> str:
    """Why the call did not run, in words a model can act on; never claims a person
    decided when nobody did."""
    if request.status == "pending":
        return (f"The approval request {request.ref} is still waiting for a person; the call "
                "was not run.")
    if request.status == "timeout":
        return f"No one answered the approval request {request.ref} in time; the call was not run."
    if request.status == "cancelled":
        return f"The approval request {request.ref} was cancelled; the call was not run."
    if request.status == "unavailable":
        return f"The approval request {request.ref} could not be delivered; the call was not run."
    reason = request.decision.reason.strip() if request.decision else ""
    by = f" by {who}" if who else ""
    return f"Rejected{by}: {reason}" if reason else f"Rejected{by}."


def verdict_of(request: HumanRequest, args: dict[str, Any]) -> Verdict:
    """The verdict of a resolved approval request for a call made with ``args``."""
    who = _who(request)
    decision = request.decision
    approved = request.status == "submitted" and decision is not None and decision.approved
    if not approved:
        return Verdict(False, dict(args), False, _refusal(request, who), str(request.status), who,
                       request)
    run_with = dict(request.updated_input) if request.updated_input is not None else dict(args)
    edited = run_with != args
    note = f"A reviewer ({who or 'someone'}) edited the arguments before approving." \
        if edited else ""
    return Verdict(True, run_with, edited, note, str(request.status), who, request)


WITHDRAWN = "The agent stopped waiting for this approval."


async def approve_call(client: AsyncClient, route: str, tool_name: str, args: dict[str, Any], *,
                       reason: str | None = None, editable: list[str] | None = None,
                       input_schema: dict[str, Any] | None = None,
                       idempotency_key: str | None = None,
                       context: dict[str, Any] | None = None,
                       agent_name: str | None = None,
                       timeout: float | None = None) -> Verdict:
    """Ask for an approval of one call bound to its exact arguments, wait, and read it.
    A caller that stops waiting withdraws the request (see :func:`settle`)."""
    creating = client.request_approval(
        route, tool_name, args, reason=reason, editable=editable, input_schema=input_schema,
        idempotency_key=idempotency_key, context=context, agent_name=agent_name)
    return verdict_of(await settle(client, creating, timeout=timeout), args)


async def settle(client: AsyncClient, creating: Awaitable[HumanRequest], *,
                 timeout: float | None = None, withdrawn: str = WITHDRAWN) -> HumanRequest:
    """Create a request (an approval or an ask) and wait until it is resolved.

    If the caller stops waiting (its task is cancelled, or it fails), the request is
    withdrawn (cancelled with the reason ``withdrawn``), even when it was abandoned while
    still being created: no card keeps asking for a decision nobody will act on.
    """
    created_future = asyncio.ensure_future(creating)
    try:
        created = await asyncio.shield(created_future)
        return await client.wait(created.ref, timeout=timeout)
    except BaseException:
        await asyncio.shield(_withdraw(client, created_future, withdrawn))
        raise


async def _withdraw(client: AsyncClient, creating: asyncio.Future[HumanRequest],
                    why: str) -> None:
    """Cancel the request once it exists (a card may be posted before its creation is
    answered). Best effort: the caller's own error is what it should see."""
    with contextlib.suppress(AskHumanError, httpx.HTTPError):
        created = await creating
        if not created.resolved:
            await client.cancel(created.ref, why)


def approve_call_sync(client: Client, route: str, tool_name: str, args: dict[str, Any], *,
                      reason: str | None = None, editable: list[str] | None = None,
                      input_schema: dict[str, Any] | None = None,
                      idempotency_key: str | None = None,
                      context: dict[str, Any] | None = None,
                      agent_name: str | None = None,
                      timeout: float | None = None) -> Verdict:
    """The blocking twin of :func:`approve_call`, for synchronous frameworks."""
    created = client.request_approval(
        route, tool_name, args, reason=reason, editable=editable, input_schema=input_schema,
        idempotency_key=idempotency_key, context=context, agent_name=agent_name)
    try:
        return verdict_of(client.wait(created.ref, timeout=timeout), args)
    except BaseException:  # Ctrl-C, a lost server: no card keeps asking nobody
        with contextlib.suppress(AskHumanError, httpx.HTTPError):
            client.cancel(created.ref, WITHDRAWN)
        raise
