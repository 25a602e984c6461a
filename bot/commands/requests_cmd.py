"""``askhuman requests list | show | cancel``: what is waiting, and withdrawing it.

Reads the database ``serve`` writes. ``cancel`` goes through the engine, so the
decision, its audit row, the card updates (outbox) and the agent's ``cancelled``
resume commit together; the running bot delivers them.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import getpass
from typing import Annotated, Any

import typer
from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.commands.admin_common import (
    ConfigOpt,
    DatabaseOpt,
    JsonOpt,
    emit,
    fail,
    iso,
    parse_since,
    served_database,
    table,
)
from bot.engine import policy, receipts, store
from bot.engine.cards import build_card, localized
from bot.engine.ports import Identity
from bot.settings import Settings
from renderers.text import render_text
from storage import AuditLog, HumanRequest, Run, Vote

requests_app = typer.Typer(help="Requests waiting for people (and decided ones).",
                           no_args_is_help=True)

STATUSES = {"open": "pending", "decided": "submitted", "timed_out": "timeout",
            "cancelled": "cancelled", "unavailable": "unavailable"}
"""The CLI's words for the stored statuses."""
WORDS = {stored: word for word, stored in STATUSES.items()}
OPERATOR_PLATFORM = "cli"


def summary(request: HumanRequest, run: Run) -> dict[str, Any]:
    """One request as a list row (the question is model-written: shown, never trusted)."""
    args = request.args or {}
    return {
        "ref": request.ref, "status": WORDS.get(request.status, request.status),
        "kind": request.kind, "route": request.route, "agent": run.agent, "run_id": run.id,
        "title": args.get("title") or args.get("question"),
        "created_at": iso(request.created_at), "deadline": iso(request.deadline),
        "decided_at": iso(request.decided_at), "decided_by": request.decided_by_name
        or request.decided_by_user,
    }


@requests_app.command("list")
def list_requests(
    status: Annotated[str | None, typer.Option(help="open | decided | timed_out | "
                                                    "cancelled | unavailable")] = None,
    route: Annotated[str | None, typer.Option(help="Only this route.")] = None,
    agent: Annotated[str | None, typer.Option(help="Only this agent.")] = None,
    since: Annotated[str | None, typer.Option(help='Created since, e.g. "2d".')] = None,
    limit: Annotated[int, typer.Option(help="At most this many (newest first).")] = 200,
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List requests, newest first."""
    if status is not None and status not in STATUSES:
        raise fail(f"--status {status!r} is not one of {', '.join(STATUSES)}")
    after = parse_since(since, dt.datetime.now(dt.UTC))
    with served_database(config, database) as (_, db), db.transaction() as session:
        query = (select(HumanRequest, Run).join(Run, Run.id == HumanRequest.run_id)
                 .order_by(HumanRequest.created_at.desc(), HumanRequest.id.desc()).limit(limit))
        if status is not None:
            query = query.where(HumanRequest.status == STATUSES[status])
        if route is not None:
            query = query.where(HumanRequest.route == route)
        if agent is not None:
            query = query.where(Run.agent == agent)
        if after is not None:
            query = query.where(HumanRequest.created_at >= after)
        rows = [summary(r, run) for r, run in session.execute(query)]
    emit(rows, as_json, lambda data: table(
        data, ["ref", "status", "route", "agent", "created_at", "deadline", "title"]))


def policy_of(settings: Settings, request: HumanRequest) -> dict[str, Any]:
    """The rules the request is held to: the copy frozen when it was raised, or (stored
    before policies were frozen) the route's current configuration, labelled as such."""
    rules = policy.of(request, settings)
    if rules is None:
        return {"source": "route no longer configured", "route": request.route,
                "quorum": request.quorum, "rules": None}
    return rules.shown()


def details(session: Session, settings: Settings, ref: str) -> dict[str, Any] | None:
    """Everything an operator needs about one request."""
    request = store.get_request(session, ref)
    if request is None:
        return None
    run = session.get(Run, request.run_id)
    if run is None:
        return None
    votes = session.scalars(select(Vote).where(Vote.request_id == request.id)
                            .order_by(Vote.id)).all()
    copies = store.deliveries(session, request.id)
    trail = session.scalars(select(AuditLog).where(AuditLog.request_ref == ref)
                            .order_by(AuditLog.id)).all()
    rules = policy.of(request, settings)
    card = policy.with_progress(session, request, build_card(request, run.agent, len(votes)),
                                rules)
    card = localized(card, rules.route if rules else None)
    key = receipts.key_from_env()
    receipt = receipts.for_request(request, votes, key) if key else None
    return {
        **summary(request, run),
        "card": render_text(card),
        "policy": policy_of(settings, request),
        "result": request.result,
        "receipt": receipt,
        "votes": [{"platform": v.platform, "user": v.user_id, "name": v.display_name,
                   "action": v.action_id, "at": iso(v.created_at)} for v in votes],
        "deliveries": [{"platform": d.platform, "channel": d.channel,
                        "message_id": d.message_id, "target": f"{d.target_kind}:{d.target_id}",
                        "at": iso(d.created_at)} for d in copies],
        "audit": [audit_row(a) for a in trail],
    }


def audit_row(row: AuditLog) -> dict[str, Any]:
    return {"id": row.id, "at": iso(row.created_at), "event": row.event,
            "outcome": row.outcome, "run_id": row.run_id, "ref": row.request_ref,
            "actor_platform": row.actor_platform, "actor": row.actor_user,
            "reason": row.reason, "details": row.details, "occurrences": row.occurrences,
            "last_seen_at": iso(row.last_seen_at)}


def show_words(data: dict[str, Any]) -> str:
    policy = data["policy"]
    lines = [data["card"], "", f"Status: {data['status']}   route: {data['route']}   "
             f"agent: {data['agent']}   run: {data['run_id']}",
             f"Policy ({policy['source']}): quorum {policy['quorum']}"
             + _policy_words(policy)]
    if data["receipt"]:
        lines.append(f"Receipt: {data['receipt']}")
    lines += ["", "Votes:"] + ([f"  {v['at']}  {v['platform']}:{v['user']}  {v['action']}"
                                for v in data["votes"]] or ["  (none)"])
    lines += ["", "Deliveries:"] + ([f"  {d['platform']}  channel {d['channel']}  "
                                     f"message {d['message_id']}" for d in data["deliveries"]]
                                    or ["  (none)"])
    lines += ["", "Audit:"] + ([f"  {a['at']}  {a['event']} ({a['outcome']})  "
                                f"{a['actor_platform'] or ''}:{a['actor'] or ''}"
                                + (f" ×{a['occurrences']}" if a["occurrences"] > 1 else "")
                                + (f"  {a['reason']}" if a["reason"] else "")
                                for a in data["audit"]] or ["  (none)"])
    return "\n".join(lines)


def _policy_words(policy: dict[str, Any]) -> str:
    """The frozen rules beyond the quorum, on the same line."""
    if policy.get("rules") is None:
        return ""
    words = [f"veto {'on' if policy['veto'] else 'off'}"]
    if policy["require"]:
        groups = [r.get("name") or r.get("group") or "+".join(r.get("users", []))
                  for r in policy["require"]]
        words.append(f"sign-off from each of: {', '.join(groups)}")
    if policy["require_reason"]:
        words.append(f"reason required for: {', '.join(policy['require_reason'])}")
    words.append(f"self-approval {'allowed' if policy['allow_self_approval'] else 'refused'}")
    timeout = policy["rules"].get("timeout")
    if timeout is not None:
        words.append(f"timeout {timeout:g}s")
    return ", " + ", ".join(words)


@requests_app.command("show")
def show(
    ref: Annotated[str, typer.Argument(help="The request's reference.")],
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One request: the card as text, its policy, votes, deliveries and audit trail."""
    with served_database(config, database) as (settings, db), db.transaction() as session:
        data = details(session, settings, ref)
    if data is None:
        raise fail(f"no request {ref!r}", 1)
    emit(data, as_json, show_words)


@requests_app.command("cancel")
def cancel(
    ref: Annotated[str, typer.Argument(help="The request's reference.")],
    reason: Annotated[str, typer.Option(help="Why (the agent and the card show it).")],
    config: ConfigOpt = None,
    database: DatabaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Withdraw an open request: the agent gets ``cancelled``, every card copy is updated
    (by the running bot, through the outbox)."""
    from bot.engine.core import Engine

    if not reason.strip():
        raise fail("--reason must say why")
    user = getpass.getuser()
    operator = Identity(OPERATOR_PLATFORM, user, f"{user} (askhuman CLI)")
    with served_database(config, database) as (settings, db):
        engine = Engine(db, settings)
        engine.outbox.dispatch_here = False  # no platforms here: the running bot updates the cards
        answer = asyncio.run(engine.cancel_as_operator(ref, operator, reason.strip()))
    data = {"ref": ref, "outcome": answer.outcome, "message": answer.message}
    emit(data, as_json, lambda d: f"{d['ref']}: {d['outcome']} ({d['message']})")
    if answer.outcome != "accepted":
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(requests_app, name="requests")



