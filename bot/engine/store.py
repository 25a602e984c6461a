"""Synchronous, single-transaction database steps used by the engine.

Each function takes an open session (the caller owns the transaction), so a
decision, its audit row and its resume job always commit together or not at all.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from collections.abc import Sequence
from typing import Any, Protocol, cast

from pydantic import JsonValue
from sqlalchemy import (
    JSON,
    CursorResult,
    DateTime,
    Result,
    String,
    Table,
    Text,
    bindparam,
    func,
    insert,
    literal,
    null,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session, defer
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.sql.elements import BindParameter

from bot import metrics
from bot.askhuman.schema import AskHumanToolArgs, AskHumanToolResult
from bot.engine import queued, tracing, waiters
from bot.engine.ports import Identity
from bot.logs import scrub, scrub_json
from storage import (
    AuditLog,
    Delivery,
    HumanRequest,
    OutboxItem,
    ResumeJob,
    Run,
    StagedFile,
    Vote,
)

OPEN = "pending"
MAX_REF_CHARS = 64
"""``human_requests.ref`` is ``String(64)``: a longer ref cannot exist."""

# The statements every click, card update and resume runs, built once with bound
# parameters. Building a ``select`` and its cache key costs SQLAlchemy ~70 µs, three
# times what SQLite then needs to run it; at ~35 statements per decision that was a
# third of the engine's CPU.
_REQUEST_BY_REF = select(HumanRequest).where(HumanRequest.ref == bindparam("ref"))
_REQUEST_BY_REF_LOCKED = _REQUEST_BY_REF.with_for_update()
_VOTE_COUNT = (select(func.count()).select_from(Vote)
               .where(Vote.request_id == HumanRequest.id)
               .correlate(HumanRequest).scalar_subquery())
_REQUEST_WITH_RUN = (
    select(HumanRequest, Run, _VOTE_COUNT).join(Run, Run.id == HumanRequest.run_id)
    .where(HumanRequest.ref == bindparam("ref"))
    # the run's big columns (message history, output, prompt) are never shown on a card
    .options(defer(Run.snapshot), defer(Run.output), defer(Run.prompt), defer(Run.error)))
_VOTES = select(Vote).where(Vote.request_id == bindparam("request_id")).order_by(Vote.id)
_DELIVERIES = (select(Delivery).where(Delivery.request_id == bindparam("request_id"))
               .order_by(Delivery.id))
_AUDIT_INSERT = insert(cast(Table, AuditLog.__table__))
_HELD_AUDITS = "askhuman.held_audits"
_REQUESTS = cast(Table, HumanRequest.__table__)
_RESOLVE = (
    update(_REQUESTS)
    .where(_REQUESTS.c.id == bindparam("request_id"), _REQUESTS.c.status == OPEN)
    .values(status=bindparam("new_status"),
            result=bindparam("new_result", type_=_REQUESTS.c.result.type),
            action_id=bindparam("new_action"), decided_by_platform=bindparam("by_platform"),
            decided_by_user=bindparam("by_user"), decided_by_name=bindparam("by_name"),
            decided_via=bindparam("by_via"), decided_at=bindparam("now"),
            version=_REQUESTS.c.version + 1, updated_at=bindparam("now"))
    .returning(_REQUESTS.c.version))
_RESUME_INSERT = insert(cast(Table, ResumeJob.__table__))
_VOTE_INSERT = insert(cast(Table, Vote.__table__))


def core(session: Session) -> Connection:
    """The session's connection, for a prebuilt Core statement (same transaction).

    ``Session.execute`` puts every statement through the ORM's execution path, ~60 µs
    even for a plain Core INSERT (the statement itself runs in ~30 µs). Pending ORM
    objects are flushed first, as ``Session.execute`` would, so a row the statement
    refers to is already written."""
    session.flush()
    return session.connection()


def rowcount(result: Result[Any]) -> int:
    """Rows matched by an UPDATE (the compare-and-set's verdict)."""
    return int(cast("CursorResult[Any]", result).rowcount)


_CHUNK_IDS: BindParameter[int] = bindparam("ids", expanding=True)
"""The ids of the requests a set-based statement covers (one expanding ``IN``)."""
_AUDIT_REQUESTS = insert(cast(Table, AuditLog.__table__)).from_select(
    ["created_at", "event", "outcome", "run_id", "request_ref", "actor_platform",
     "actor_user", "reason", "details", "occurrences", "last_seen_at", "aggregate_key"],
    select(bindparam("now", type_=DateTime()), bindparam("event", type_=String()),
           literal("ok"), _REQUESTS.c.run_id, _REQUESTS.c.ref, null(), null(),
           bindparam("reason", type_=Text()), bindparam("details", type_=JSON()),
           literal(1), null(), null())
    .where(_REQUESTS.c.id.in_(_CHUNK_IDS))
    .order_by(_REQUESTS.c.deadline, _REQUESTS.c.id))


def audit_requests(session: Session, now: dt.datetime, event: str, ids: Sequence[int], *,
                   reason: str | None = None) -> None:
    """``audit`` for many requests at once (a timeout sweep's chunk): one row per
    request id, the same event and reason for all, no actor, no details, in deadline
    order. One ``INSERT … SELECT`` reads each row's run and ref in the database, so no
    row is built or bound in Python: 10,000 rows cost ~35 ms instead of ~0.18 s (as an
    executemany of dicts, each timestamp formatted and ``{}`` encoded per row). The
    reason is scrubbed once. Whatever ``audit`` adds to each row must be added here
    too."""
    if ids:
        core(session).execute(_AUDIT_REQUESTS, {
            "now": now, "event": event, "reason": scrub(reason) if reason else reason,
            "details": {}, "ids": list(ids)})


def audit(
    session: Session,
    now: dt.datetime,
    event: str,
    *,
    outcome: str = "ok",
    run_id: str | None = None,
    ref: str | None = None,
    actor: Identity | None = None,
    reason: str | None = None,
    details: dict[str, Any] | None = None,
    into: list[dict[str, Any]] | None = None,
) -> None:
    """Append one audit row (who, what, why) to the current transaction.

    ``reason`` and ``details`` often carry exception texts (a model provider's error
    may echo its API key), so both are scrubbed like log lines before they are stored.
    Refusals (``outcome="refused"``) are counted on one row per event, person and
    request instead (see ``count_refusal``). ``into``: collect the row there instead,
    for the caller to write with its others in one statement (``insert_audits``).
    """
    values: dict[str, Any] = {
        "created_at": now, "event": event, "outcome": outcome, "run_id": run_id,
        "request_ref": ref, "actor_platform": actor.platform if actor else None,
        "actor_user": actor.user_id if actor else None,
        "reason": scrub(reason) if reason else reason,
        "details": scrub_json(details or {}),
    }
    if actor is not None and actor.via:  # a delegate acted: "Bob for Alice", Bob's own id
        values["details"] = {**values["details"], "delegate": actor.via,
                             "acting_as": actor.display_name}
    if outcome == "refused":
        count_refusal(session, values)
    elif into is not None:
        into.append(values)
    else:
        insert_audits(session, [values])


def insert_audits(session: Session, rows: list[dict[str, Any]]) -> None:
    """Write audit rows collected with ``audit(..., into=rows)``, in their order, as one
    statement (one executemany on SQLite, one multi-row INSERT on PostgreSQL): a
    resume writes two rows, and each statement costs ~0.1 ms of SQLAlchemy. In a
    transaction that holds its audit rows (``hold_audits``) they wait for its end."""
    held: list[dict[str, Any]] | None = session.info.get(_HELD_AUDITS)
    if held is not None:
        held.extend(rows)
    elif rows:
        core(session).execute(_AUDIT_INSERT, rows)  # no ORM object or ORM path


def hold_audits(session: Session) -> None:
    """Keep this transaction's audit rows until ``write_held_audits``: a group commit
    (``Committer.batched``) writes those of all its steps in one statement instead of
    one or two per decision. Nothing reads an audit row in the transaction that writes
    it, and the rows keep their order; refusals still count on their aggregate row at
    once (``count_refusal``)."""
    session.info[_HELD_AUDITS] = []


def write_held_audits(session: Session) -> None:
    """Write the rows ``hold_audits`` kept (before the commit); later ones go at once."""
    held: list[dict[str, Any]] = session.info.pop(_HELD_AUDITS, None) or []
    insert_audits(session, held)


def count_refusal(session: Session, values: dict[str, Any]) -> None:
    """Record a refused attempt on its aggregate row: one per (event, person, request),
    and per adapter check (``details["check"]``, a small fixed set) for adapter refusals.

    The first refusal inserts the row (its reason and details are kept); every repeat
    only bumps ``occurrences`` and moves ``last_seen_at`` to its own ``created_at`` (an
    atomic ``INSERT … ON CONFLICT DO UPDATE`` on ``aggregate_key``, so concurrent
    replicas count correctly). A
    reference that names no request (a forged or mistyped one) is kept in the first
    row's details but not in the key, so random references cannot add rows either.

    Both statements are built once (``_REFUSAL_UPSERT``, ``_REQUEST_EXISTS``): every
    loser of a race on a card is refused here, and building the upsert and loading the
    whole request for each cost ~0.9 ms of a 1.4 ms refusal.
    """
    ref = values["request_ref"]
    if ref and (len(ref) > MAX_REF_CHARS
                or core(session).execute(_REQUEST_EXISTS, {"ref": ref}).first() is None):
        values = {**values, "request_ref": None, "details": {**values["details"],
                                                               "ref": str(ref)[:MAX_REF_CHARS]}}
    check = values["details"].get("check")
    parts = (values["event"], values["request_ref"], values["actor_platform"],
             values["actor_user"], str(check)[:100] if check else "")
    key = hashlib.sha256("\x1f".join(str(p or "") for p in parts).encode()).hexdigest()
    upsert = _REFUSAL_UPSERT[session.get_bind().dialect.name == "postgresql"]
    core(session).execute(upsert, {**values, "aggregate_key": key, "occurrences": 1})


def _refusal_upsert(dialect_insert: Any) -> Any:
    """``count_refusal``'s statement for one dialect: the row's columns come from the
    parameters it is run with; a repeat counts once more and moves ``last_seen_at`` to
    its own time."""
    table = cast(Table, AuditLog.__table__)
    statement = dialect_insert(table)
    return statement.on_conflict_do_update(
        index_elements=[table.c.aggregate_key],
        set_={"occurrences": table.c.occurrences + 1,
              "last_seen_at": statement.excluded.created_at})


_REFUSAL_UPSERT = (_refusal_upsert(sqlite.insert), _refusal_upsert(postgresql.insert))
"""``count_refusal``'s upsert: [0] SQLite, [1] PostgreSQL."""
_REQUEST_EXISTS = select(_REQUESTS.c.id).where(_REQUESTS.c.ref == bindparam("ref"))


class Started(Protocol):
    """Who started a run: a ``Run``, or a ``card_rows.CardRow`` (which reads its run's)."""

    @property
    def started_by_platform(self) -> str: ...
    @property
    def started_by_user(self) -> str: ...
    @property
    def started_by_name(self) -> str | None: ...


def starter(run: Started) -> Identity:
    return Identity(run.started_by_platform, run.started_by_user, run.started_by_name)


def get_request(session: Session, ref: str, *, lock: bool = False) -> HumanRequest | None:
    """The request with ``ref``; ``lock`` takes a row lock on PostgreSQL."""
    if not ref or len(ref) > MAX_REF_CHARS:
        return None  # refs come from payloads: a 5 MB one never reaches a query
    query = _REQUEST_BY_REF_LOCKED if lock else _REQUEST_BY_REF
    return session.scalars(query, {"ref": ref}).first()


def request_with_run(session: Session, ref: str) -> tuple[HumanRequest, Run, int] | None:
    """The request with ``ref``, its run and how many responses it has, in one statement
    (every click and every card update starts here; three lookups cost three times as
    much ORM work)."""
    if not ref or len(ref) > MAX_REF_CHARS:
        return None
    row = session.execute(_REQUEST_WITH_RUN, {"ref": ref}).first()
    return None if row is None else (row[0], row[1], int(row[2] or 0))


def delivered_channels(session: Session, request_id: int, platform: str) -> list[str]:
    query = select(Delivery.channel).where(
        Delivery.request_id == request_id, Delivery.platform == platform
    )
    return list(dict.fromkeys(session.scalars(query)))


def deliveries(session: Session, request_id: int) -> Sequence[Delivery]:
    return session.scalars(_DELIVERIES, {"request_id": request_id}).all()


def card_being_posted(session: Session, ref: str) -> bool:
    """Whether a card of the request ``ref`` may be on a platform without its
    ``deliveries`` row yet: its post (``deliver_request``) is queued or running. The
    platform answers the post before that row is written (in its own transaction, or
    after a crash, by the retry that finds the message again), so a click can name a
    message askhuman has not recorded; such a click waits, it is not refused."""
    query = (select(OutboxItem.id).join(HumanRequest, HumanRequest.id == OutboxItem.request_id)
             .where(HumanRequest.ref == ref, OutboxItem.kind == "deliver_request",
                    OutboxItem.state.in_(("queued", "running"))).limit(1))
    return session.scalar(query) is not None


def vote_count(session: Session, request_id: int) -> int:
    query = select(func.count()).select_from(Vote).where(Vote.request_id == request_id)
    return int(session.scalar(query) or 0)


def staged_files(session: Session, request_id: int, who: Identity) -> dict[str, list[Any]]:
    rows = session.scalars(
        select(StagedFile)
        .where(
            StagedFile.request_id == request_id,
            StagedFile.platform == who.platform,
            StagedFile.user_id == who.user_id,
        )
        .order_by(StagedFile.id)
    )
    out: dict[str, list[Any]] = {}
    for row in rows:
        out.setdefault(row.field_name, []).extend(row.files)
    return out


def new_ref() -> str:
    """A request's public reference: 16 random URL-safe characters (96 bits) that never
    start with ``-``, which a command line would read as an option
    (``askhuman requests show -M3x…`` failed)."""
    ref = secrets.token_urlsafe(12)
    return "R" + ref[1:] if ref.startswith("-") else ref


def create_request(
    session: Session,
    now: dt.datetime,
    run: Run,
    tool_call_id: str,
    args: AskHumanToolArgs,
    route: str,
    quorum: int,
    deadline: dt.datetime | None,
) -> HumanRequest:
    request = HumanRequest(
        ref=new_ref(),
        run_id=run.id,
        tool_call_id=tool_call_id,
        args=args.model_dump(mode="json"),
        route=route,
        quorum=quorum,
        status=OPEN,
        deadline=deadline,
        version=1,
        created_at=now,
        updated_at=now,
        trace_context=run.trace_context,  # the run's (an API caller's), or None
    )
    session.add(request)
    session.flush()
    tracing.raised(session, request, run.agent)
    return request


def resolve(
    session: Session,
    now: dt.datetime,
    request: HumanRequest,
    result: AskHumanToolResult,
    by: Identity | None,
    *,
    resume: bool = True,
) -> bool:
    """Compare-and-set ``pending`` → ``result.status`` and queue the resume (unless
    ``resume`` is False: the caller finishes the run in this same transaction, as the
    door does for a request a standing grant approves when it is created).

    Returns False (and changes nothing) when someone else resolved it first.
    """
    stored = result.model_dump(mode="json")
    action = result.action.id if result.action else None
    version = core(session).execute(_RESOLVE, {
        "request_id": request.id, "new_status": result.status, "new_result": stored,
        "new_action": action, "by_platform": by.platform if by else None,
        "by_user": by.user_id if by else None, "by_name": by.display_name if by else None,
        "by_via": by.via if by else None, "now": now}).scalar()
    if version is None:
        return False
    _show_resolved(request, result.status, stored, action, by, now, int(version))
    metrics.observe_decision(request.route, result.status, request.created_at, now)
    tracing.resolved(session, request, result.status, action, by, now)
    waiters.mark(session, request.ref)  # woken (and NOTIFYed) when this commits
    if not resume or not batch_resolved(session, request):
        return True  # the run resumes when the last request of its step is resolved
    job = {"request_id": request.id, "run_id": request.run_id, "state": "queued",
           "attempts": 0, "next_attempt_at": now, "created_at": now, "updated_at": now}
    offer = queued.open_offer(session)
    if offer is None:
        core(session).execute(_RESUME_INSERT, job)
    else:  # born claimed by the deciding process's free slot (``ResumeWorker.claim_in``)
        inserted = core(session).execute(_RESUME_INSERT, {
            **job, "state": "running", "attempts": 1, "claim_token": offer.token,
            "lease_until": offer.lease_until, "holder": offer.holder})
        key = cast("CursorResult[Any]", inserted).inserted_primary_key
        assert key is not None
        offer.job_id, offer.request = int(key[0]), request
    queued.resumes(session, request.id)  # the resume loop is woken once this commits
    return True


def _show_resolved(request: HumanRequest, status: str, result: dict[str, Any],
                   action: str | None, by: Identity | None, now: dt.datetime,
                   version: int) -> None:
    """Make the loaded ``request`` show what ``resolve`` just wrote, without reading the
    row back (the UPDATE returned the new version; everything else is known here)."""
    for key, value in (("status", status), ("result", result), ("action_id", action),
                       ("decided_by_platform", by.platform if by else None),
                       ("decided_by_user", by.user_id if by else None),
                       ("decided_by_name", by.display_name if by else None),
                       ("decided_via", by.via if by else None), ("decided_at", now),
                       ("version", version), ("updated_at", now)):
        set_committed_value(request, key, value)


def batch_resolved(session: Session, request: HumanRequest) -> bool:
    """Whether no other request of ``request``'s step (its ``batch``) is still pending.

    A model step may ask several things at once (tool approvals, an ask_human call):
    each is its own request and the run resumes once, after the last one. On
    PostgreSQL the run row is locked first, so two siblings resolved at the same time
    cannot both see the other as pending (SQLite serializes every write anyway).
    """
    if request.batch is None:
        return True
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(Run.id).where(Run.id == request.run_id).with_for_update())
    others = session.scalar(
        select(func.count()).select_from(HumanRequest).where(
            HumanRequest.run_id == request.run_id,
            HumanRequest.batch == request.batch,
            HumanRequest.id != request.id,
            HumanRequest.status == OPEN,
        )
    )
    return not others


def record_vote(
    session: Session,
    now: dt.datetime,
    request: HumanRequest,
    who: Identity,
    action_id: str,
    values: dict[str, JsonValue],
    *,
    person: str | None = None,
    signoff: list[int] | None = None,
) -> Vote:
    """Store one response; returns it as a (transient) row for ``policy.ballots_of``.
    ``person`` / ``signoff``: who it counts as and its sign-off groups (``policy``)."""
    row = {"request_id": request.id, "platform": who.platform, "user_id": who.user_id,
           "display_name": who.display_name, "action_id": action_id, "values": values,
           "created_at": now, "person": person, "signoff": signoff}
    core(session).execute(_VOTE_INSERT, row)  # no ORM object to track and flush
    return Vote(**row)


def votes_of(session: Session, request_id: int) -> Sequence[Vote]:
    """Every response to the request, oldest first."""
    return session.scalars(_VOTES, {"request_id": request_id}).all()


def earlier_vote(votes: Sequence[Vote], who: Identity, person: str | None = None
                 ) -> Vote | None:
    """``who``'s response among ``votes``, or (``person``) the same person's from another
    identity."""
    for vote in votes:
        if (vote.platform, vote.user_id) == (who.platform, who.user_id) or (
                person is not None and vote.person == person):
            return vote
    return None


def bump_version(session: Session, now: dt.datetime, request: HumanRequest) -> None:
    """A new card version of a pending request (a vote that did not decide it).

    Like every statement that moves a version on (``resolve``, the reminder and
    escalation claims, the expiry sweep), it changes only a pending request: a decided
    card is its last version, so a card update that sent it needs no check for a newer
    one (``DeliveryHandlers._update_copy``). Raises if the request is no longer pending
    (the caller holds it, so that is a bug, and the transaction rolls back)."""
    changed = rowcount(session.execute(
        update(HumanRequest)
        .where(HumanRequest.id == request.id, HumanRequest.status == OPEN)
        .values(version=HumanRequest.version + 1, updated_at=now)
        .execution_options(synchronize_session=False)
    ))
    if changed != 1:
        raise RuntimeError(f"request {request.ref} is no longer pending: no new version")
    session.refresh(request)
