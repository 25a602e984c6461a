"""The tables. Timestamps are stored as naive UTC (portable across SQLite/PostgreSQL)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    Double,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

Json = dict[str, Any]


class Base(DeclarativeBase):
    """Declarative base; ``Base.metadata`` is what Alembic migrations mirror."""


class Run(Base):
    """One agent run, from the first prompt through every resume to its end."""

    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    agent: Mapped[str] = mapped_column(String(200))
    started_by_platform: Mapped[str] = mapped_column(String(32))
    started_by_user: Mapped[str] = mapped_column(String(200))
    started_by_name: Mapped[str | None] = mapped_column(String(200))
    origin_platform: Mapped[str] = mapped_column(String(32))
    origin_channel: Mapped[str | None] = mapped_column(String(200))
    origin_thread: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(32), index=True)
    """running | waiting | succeeded | failed."""
    prompt: Mapped[str] = mapped_column(Text)
    snapshot: Mapped[Json | None] = mapped_column(JSON)
    output: Mapped[Any | None] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column()
    updated_at: Mapped[dt.datetime] = mapped_column()
    redacted_at: Mapped[dt.datetime | None] = mapped_column()
    """When retention cleared the prompt, snapshot and output (None: kept)."""
    trace_context: Mapped[Json | None] = mapped_column(JSON)
    """The W3C trace context ``{traceparent, tracestate?}`` the run was started with
    (``POST /api/v1/runs``); None: none was sent. Its resume spans are its children."""

    __table_args__ = (
        Index("ix_runs_redacted_updated", "redacted_at", "updated_at"),
        Index("ix_runs_started_by", "started_by_platform", "started_by_user", "created_at"),
    )


class HumanRequest(Base):
    """One ask_human call waiting for (or given) a human decision."""

    __tablename__ = "human_requests"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    ref: Mapped[str] = mapped_column(String(64), unique=True)
    """Opaque, unguessable reference carried in buttons and callbacks."""
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"), index=True)
    tool_call_id: Mapped[str] = mapped_column(String(200))
    args: Mapped[Json] = mapped_column(JSON)
    """Normalized ask_human arguments (untrusted, display only)."""
    route: Mapped[str] = mapped_column(String(200))
    quorum: Mapped[int] = mapped_column(Integer, default=1)
    status: Mapped[str] = mapped_column(String(32))
    """pending | submitted | timeout | cancelled | unavailable."""
    deadline: Mapped[dt.datetime | None] = mapped_column()
    decided_by_platform: Mapped[str | None] = mapped_column(String(32))
    decided_by_user: Mapped[str | None] = mapped_column(String(200))
    decided_by_name: Mapped[str | None] = mapped_column(String(200))
    decided_at: Mapped[dt.datetime | None] = mapped_column()
    decided_via: Mapped[str | None] = mapped_column(String(200))
    """A delegate's user id when they decided for ``decided_by_user`` (out of office)."""
    action_id: Mapped[str | None] = mapped_column(String(200))
    result: Mapped[Json | None] = mapped_column(JSON)
    """The AskHumanToolResult sent to the agent."""
    version: Mapped[int] = mapped_column(Integer, default=1)
    next_reminder_at: Mapped[dt.datetime | None] = mapped_column()
    """When the next reminder is due (None: no reminders for this request)."""
    reminders_sent: Mapped[int] = mapped_column(Integer, default=0)
    escalate_at: Mapped[dt.datetime | None] = mapped_column()
    """When the request is escalated to its route's escalation route (None: never)."""
    escalated_at: Mapped[dt.datetime | None] = mapped_column()
    escalation_route: Mapped[str | None] = mapped_column(String(200))
    """The last escalation route reached (``escalated_routes`` lists them all)."""
    escalation_step: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """How many steps of the route's escalation chain were reached (the sweep's
    compare-and-set: each step is claimed once, across replicas)."""
    escalated_routes: Mapped[list[str] | None] = mapped_column(JSON)
    """Every escalation route reached, in order; their approvers may answer too."""
    reminded_at: Mapped[dt.datetime | None] = mapped_column()
    """When the last reminder was sent (cards show it)."""
    kind: Mapped[str] = mapped_column(String(32), default="ask_human",
                                      server_default="ask_human")
    """ask_human | tool_approval (a tool call that runs only once approved)."""
    tool: Mapped[Json | None] = mapped_column(JSON)
    """tool_approval: the call as the card shows it (tool, description, args, fixed)."""
    binding: Mapped[str | None] = mapped_column(String(64))
    """tool_approval: hash of the tool name and canonical JSON arguments it approves."""
    batch: Mapped[str | None] = mapped_column(String(64))
    """Requests from one model step share a batch; the run resumes once all are resolved
    (None: a request alone, as before tool approvals existed)."""
    created_at: Mapped[dt.datetime] = mapped_column()
    updated_at: Mapped[dt.datetime] = mapped_column()
    redacted_at: Mapped[dt.datetime | None] = mapped_column()
    """When retention removed the answer's values (None: kept)."""
    policy: Mapped[Json | None] = mapped_column(JSON)
    """The route's rules frozen when the request was raised (``bot.engine.policy``);
    None for requests stored before 0010_policy (the live route applies)."""
    trace_context: Mapped[Json | None] = mapped_column(JSON)
    """The W3C trace context ``{traceparent, tracestate?}`` of its creator (the API
    caller, or its run's), or of its own "raised" span when tracing is on and none was
    sent; the request's spans are its children (``bot.engine.tracing``)."""

    __table_args__ = (
        Index("ix_human_requests_run_batch", "run_id", "batch"),
        Index("ix_human_requests_redacted_decided", "redacted_at", "decided_at"),
        Index("ix_human_requests_status_deadline", "status", "deadline"),
        Index("ix_human_requests_status_reminder", "status", "next_reminder_at"),
        Index("ix_human_requests_status_escalate", "status", "escalate_at"),
    )


class Delivery(Base):
    """Where a request card was posted, so it can be updated for everyone later."""

    __tablename__ = "deliveries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    request_id: Mapped[int] = mapped_column(ForeignKey("human_requests.id"), index=True)
    platform: Mapped[str] = mapped_column(String(32))
    target_kind: Mapped[str] = mapped_column(String(32))
    target_id: Mapped[str] = mapped_column(String(200))
    channel: Mapped[str] = mapped_column(String(200))
    message_id: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[dt.datetime] = mapped_column()

    __table_args__ = (Index("ix_deliveries_platform_message", "platform", "message_id"),)


class Vote(Base):
    """A response: who answered, with which action and values, and when.

    With a quorum, each allowed person has at most one vote per request.
    """

    __tablename__ = "responses"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    request_id: Mapped[int] = mapped_column(ForeignKey("human_requests.id"), index=True)
    platform: Mapped[str] = mapped_column(String(32))
    user_id: Mapped[str] = mapped_column(String(200))
    display_name: Mapped[str | None] = mapped_column(String(200))
    action_id: Mapped[str] = mapped_column(String(200))
    values: Mapped[Json] = mapped_column(JSON)
    created_at: Mapped[dt.datetime] = mapped_column()
    person: Mapped[str | None] = mapped_column(String(200))
    """Who this counts as: ``people:<name>`` for an identity mapped under ``people``,
    else ``<platform>:<user id>``; one person votes once across platforms."""
    signoff: Mapped[list[Any] | None] = mapped_column(JSON)
    """Indexes of the route's ``require`` groups the responder belonged to."""

    __table_args__ = (UniqueConstraint("request_id", "platform", "user_id"),)


class StagedFile(Base):
    """Files a responder attached (e.g. a Feishu thread reply) before submitting the form."""

    __tablename__ = "staged_files"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    request_id: Mapped[int] = mapped_column(ForeignKey("human_requests.id"), index=True)
    platform: Mapped[str] = mapped_column(String(32))
    user_id: Mapped[str] = mapped_column(String(200))
    field_name: Mapped[str] = mapped_column(String(200))
    files: Mapped[list[Any]] = mapped_column(JSON)
    created_at: Mapped[dt.datetime] = mapped_column()


class ResumeJob(Base):
    """The durable resume queue: one job per resolved request.

    ``state`` is queued → running (claimed, with a lease) → done | failed. A claimed job
    whose lease expired may be claimed again; ``claim_token`` makes the completion a
    compare-and-set so a worker that lost its lease cannot complete the job twice.
    """

    __tablename__ = "resume_jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    request_id: Mapped[int] = mapped_column(ForeignKey("human_requests.id"), unique=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"), index=True)
    state: Mapped[str] = mapped_column(String(32))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[dt.datetime] = mapped_column()
    lease_until: Mapped[dt.datetime | None] = mapped_column()
    claim_token: Mapped[str | None] = mapped_column(String(64))
    holder: Mapped[str | None] = mapped_column(String(64))
    """The ``instances`` row of the process holding the lease: a dead holder's rows are
    taken over as soon as its heartbeat goes stale, without waiting out the lease."""
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column()
    updated_at: Mapped[dt.datetime] = mapped_column()

    __table_args__ = (Index("ix_resume_jobs_state_next", "state", "next_attempt_at"),)


class OutboxItem(Base):
    """A side effect a platform still has to see, written in the state change's transaction.

    ``kind`` is deliver_request | update_card | post_run_result. ``state`` is queued →
    running (claimed, with a lease) → done | failed, exactly like ``ResumeJob``: a
    process that dies mid-call leaves a lease that expires, and the next sweep retries,
    so a committed change is never left untold.
    """

    __tablename__ = "outbox"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(32))
    request_id: Mapped[int | None] = mapped_column(ForeignKey("human_requests.id"), index=True)
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id"), index=True)
    platform: Mapped[str | None] = mapped_column(String(32))
    """The platform told (post_run_result); None = every platform of the request."""
    payload: Mapped[Json] = mapped_column(JSON, default=dict)
    state: Mapped[str] = mapped_column(String(32))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[dt.datetime] = mapped_column()
    lease_until: Mapped[dt.datetime | None] = mapped_column()
    claim_token: Mapped[str | None] = mapped_column(String(64))
    holder: Mapped[str | None] = mapped_column(String(64))
    """The ``instances`` row of the process holding the lease: a dead holder's rows are
    taken over as soon as its heartbeat goes stale, without waiting out the lease."""
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column()
    updated_at: Mapped[dt.datetime] = mapped_column()

    __table_args__ = (Index("ix_outbox_state_next", "state", "next_attempt_at"),)


class AuditLog(Base):
    """Every state change and every refused attempt: who, what, why.

    Refused attempts are aggregated: one row per (event, person, request) with
    ``aggregate_key`` set, counting ``occurrences`` from ``created_at`` (first seen) to
    ``last_seen_at``, so a flood of refused clicks cannot grow the table without limit.
    """

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[dt.datetime] = mapped_column(index=True)
    event: Mapped[str] = mapped_column(String(64), index=True)
    outcome: Mapped[str] = mapped_column(String(32))
    """ok | refused | error."""
    run_id: Mapped[str | None] = mapped_column(String(64), index=True)
    request_ref: Mapped[str | None] = mapped_column(String(64), index=True)
    actor_platform: Mapped[str | None] = mapped_column(String(32))
    actor_user: Mapped[str | None] = mapped_column(String(200))
    reason: Mapped[str | None] = mapped_column(Text)
    details: Mapped[Json] = mapped_column(JSON, default=dict)
    occurrences: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    """How many times this happened (refusals are counted on one row)."""
    last_seen_at: Mapped[dt.datetime | None] = mapped_column()
    """The latest occurrence of an aggregated refusal (None: happened once)."""
    aggregate_key: Mapped[str | None] = mapped_column(String(255))
    """Identifies an aggregated refusal: event, person and (existing) request."""

    chain_seq: Mapped[int | None] = mapped_column(Integer)
    """Position in the audit hash chain (None: not sealed yet; sealing runs every few
    seconds in the bot and before ``askhuman audit verify``)."""
    prev_hash: Mapped[str | None] = mapped_column(String(64))
    row_hash: Mapped[str | None] = mapped_column(String(64))
    """sha256 of ``prev_hash`` and the row's immutable content (``bot.engine.audit_chain``)."""

    __table_args__ = (UniqueConstraint("aggregate_key", name="uq_audit_log_aggregate_key"),
                      UniqueConstraint("chain_seq", name="uq_audit_log_chain_seq"))


class AuditChainHead(Base):
    """The audit hash chain's tip: one row (id 1), locked by the sealer, so replicas
    never fork the chain."""

    __tablename__ = "audit_chain_head"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, default=0)
    last_hash: Mapped[str] = mapped_column(String(64))
    updated_at: Mapped[dt.datetime | None] = mapped_column()


class AuditChainGap(Base):
    """Retention deleted sealed audit rows: the chain jumps from the row at
    ``after_seq`` (hash ``from_hash``; seq 0 is the genesis) to a row whose
    ``prev_hash`` is ``to_hash``. Verification accepts exactly these jumps."""

    __tablename__ = "audit_chain_gaps"

    after_seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    from_hash: Mapped[str] = mapped_column(String(64))
    to_hash: Mapped[str] = mapped_column(String(64))
    rows: Mapped[int] = mapped_column(Integer)
    pruned_at: Mapped[dt.datetime] = mapped_column()


class SeenEvent(Base):
    """A platform event or callback already processed, shared by every replica.

    Platforms retry events (Slack ``X-Slack-Retry-Num``, Feishu re-pushes) and a
    retry may reach another process; the primary key makes "first seen" a single
    atomic insert. Rows older than the platforms' retry/replay windows are pruned.
    """

    __tablename__ = "seen_events"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    """Platform-qualified id, e.g. ``slack:event:Ev123`` or ``feishu:nonce:abc``."""
    platform: Mapped[str] = mapped_column(String(32))
    seen_at: Mapped[dt.datetime] = mapped_column(index=True)


class ApiClient(Base):
    """A caller of the HTTP API / MCP server, defined by an admin (``askhuman api-key``).

    Only a SHA-256 hash of the bearer key is stored (keys are 256-bit random, so a
    fast hash is enough). The webhook signing secret must be usable to sign, so it is
    stored encrypted (``secret_enc``, AES-GCM under ``ASKHUMAN_SECRET_KEY``).
    """

    __tablename__ = "api_clients"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    key_prefix: Mapped[str] = mapped_column(String(32))
    """The key's first characters, shown by ``api-key list`` to tell keys apart."""
    secret_enc: Mapped[str] = mapped_column(Text)
    previous_secret_enc: Mapped[str | None] = mapped_column(Text)
    """The secret before the last ``rotate-secret``; webhooks are signed with both for a
    grace period so receivers can switch without dropping deliveries."""
    secret_rotated_at: Mapped[dt.datetime | None] = mapped_column()
    routes: Mapped[list[Any]] = mapped_column(JSON)
    agents: Mapped[list[Any]] = mapped_column(JSON)
    rate_limit: Mapped[int] = mapped_column(Integer)
    """Requests per minute, across all replicas (``RateLimit``)."""
    created_at: Mapped[dt.datetime] = mapped_column()
    revoked_at: Mapped[dt.datetime | None] = mapped_column()


class RateLimit(Base):
    """One API client's token bucket, shared by every replica (``bot.engine.rate_limits``).

    A request spends a token with one conditional UPDATE that also adds the refill
    since ``updated_at``, so concurrent replicas serialize on this row and together
    never exceed the client's rate. Times are epoch seconds (the arithmetic is the
    same in SQLite and PostgreSQL); the row is made on the client's first request.
    """

    __tablename__ = "rate_limits"

    client_id: Mapped[int] = mapped_column(ForeignKey("api_clients.id"), primary_key=True)
    tokens: Mapped[float] = mapped_column(Double)
    updated_at: Mapped[float] = mapped_column(Double)


class ExternalRequest(Base):
    """A request asked through the API or MCP: no embedded agent run waits behind it.

    Its ``HumanRequest`` has a run of its own (origin platform ``api``) so cards,
    approvers, reminders and the audit work unchanged; when it resolves, the resume
    queue settles it without a runtime and queues the webhook (``bot.engine.external``).
    """

    __tablename__ = "external_requests"

    request_id: Mapped[int] = mapped_column(ForeignKey("human_requests.id"), primary_key=True)
    client_id: Mapped[int] = mapped_column(ForeignKey("api_clients.id"))
    kind: Mapped[str] = mapped_column(String(16))
    """ask | approval."""
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    fingerprint: Mapped[str] = mapped_column(String(64))
    """SHA-256 of the creating body: the same key with another body is a conflict."""
    callback_url: Mapped[str | None] = mapped_column(Text)
    context: Mapped[Json | None] = mapped_column(JSON)
    tool_name: Mapped[str | None] = mapped_column(String(200))
    tool_input: Mapped[Json | None] = mapped_column(JSON)
    created_at: Mapped[dt.datetime] = mapped_column()

    __table_args__ = (
        UniqueConstraint("client_id", "idempotency_key"),
        Index("ix_external_requests_client", "client_id", "request_id"),
    )


class RunTrigger(Base):
    """A run started by an event (``POST /api/v1/runs``) or a schedule.

    ``id`` is also the run's id. A schedule's firing is the unique pair
    ``(schedule, fire_at)``, so replicas racing to fire it insert one row only. The row
    is born ``claimed`` with a lease; the run is started after the commit and the row
    marked ``started``. A claim whose lease ran out without a run row (the process died
    in between) is claimed again by the sweep.
    """

    __tablename__ = "run_triggers"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    source: Mapped[str] = mapped_column(String(16))
    """api | schedule."""
    schedule: Mapped[str | None] = mapped_column(String(200))
    fire_at: Mapped[dt.datetime | None] = mapped_column()
    client_id: Mapped[int | None] = mapped_column(ForeignKey("api_clients.id"), index=True)
    agent: Mapped[str] = mapped_column(String(200))
    prompt: Mapped[str] = mapped_column(Text)
    origin_platform: Mapped[str] = mapped_column(String(32))
    origin_channel: Mapped[str | None] = mapped_column(String(200))
    state: Mapped[str] = mapped_column(String(16))
    """claimed | started."""
    lease_until: Mapped[dt.datetime | None] = mapped_column()
    created_at: Mapped[dt.datetime] = mapped_column()
    updated_at: Mapped[dt.datetime] = mapped_column()
    trace_context: Mapped[Json | None] = mapped_column(JSON)
    """The W3C trace context of ``POST /api/v1/runs``, handed to the run it starts."""

    __table_args__ = (
        UniqueConstraint("schedule", "fire_at"),
        Index("ix_run_triggers_state_lease", "state", "lease_until"),
    )


class Delegation(Base):
    """An approver hands their approvals to someone else until ``until`` (out of office).

    Active while ``revoked_at`` is None and ``until`` is in the future; ended rows stay
    so a late click by the former delegate is refused with a clear message.
    """

    __tablename__ = "delegations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    platform: Mapped[str] = mapped_column(String(32))
    from_user: Mapped[str] = mapped_column(String(200))
    from_name: Mapped[str | None] = mapped_column(String(200))
    to_user: Mapped[str] = mapped_column(String(200))
    to_name: Mapped[str | None] = mapped_column(String(200))
    until: Mapped[dt.datetime] = mapped_column()
    created_by: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[dt.datetime] = mapped_column()
    revoked_at: Mapped[dt.datetime | None] = mapped_column()
    revoked_by: Mapped[str | None] = mapped_column(String(200))

    __table_args__ = (Index("ix_delegations_to", "platform", "to_user"),
                      Index("ix_delegations_from", "platform", "from_user"))


class Instance(Base):
    """A running askhuman process, and its heartbeat.

    Each process that runs the worker loops registers here and beats every second or
    so. The lease queues (resume jobs, the outbox, the click inbox) stamp the rows a
    process holds with its id (``holder``), so when a holder's heartbeat goes stale
    (killed, crashed, its host gone) another process, or the restarted one, takes its
    rows over within seconds instead of waiting out their leases. A live holder's rows
    are never taken over: its heartbeat is fresh. A clean shutdown sets ``stopped_at``.
    """

    __tablename__ = "instances"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[dt.datetime] = mapped_column()
    heartbeat_at: Mapped[dt.datetime] = mapped_column(index=True)
    stopped_at: Mapped[dt.datetime | None] = mapped_column()
