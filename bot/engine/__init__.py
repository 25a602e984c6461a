"""The approval lifecycle: runs, requests, decisions, resumes, timeouts (platform-agnostic).

Build one ``Engine`` per process and share it with every platform adapter::

    from bot.engine import Engine, Identity, Origin
    from bot.settings import load_settings
    from storage import Database

    settings = load_settings()                 # YAML + env, or the built-in default
    db = Database(settings.database_url); db.upgrade()
    engine = Engine(db, settings)              # runtimes from bot.agents by default
    engine.register_adapter(slack_adapter, slack_directory)

Public API (all coroutines are safe to call concurrently, from several processes too):

- ``Engine(database, settings, runtimes=None, clock=None, *, max_attempts=5,
  backoff_base=2.0, backoff_cap=300.0, lease_seconds=15.0, outbox_max_attempts=8,
  outbox_lease_seconds=15.0, heartbeat_seconds=None,
  seen_retention_seconds=86400, outbox_retention_seconds=7*86400,
  housekeeping_interval_seconds=600)`` — ``runtimes`` maps an agent name to an
  ``AgentRuntime`` (default: ``bot.agents`` registry); ``clock`` returns an aware UTC
  datetime (tests pass a fake one). The ``outbox_*`` knobs bound platform retries; all
  the knobs live on ``engine.tuning`` (``context.Tuning``), shared by every service.
  Leases are short: while a resume or an outbox item runs, its lease is renewed every
  ``heartbeat_seconds`` (default: a third of the shorter lease), and every row names its
  holder process, whose own heartbeat (``instances``, every second while
  ``serve_forever`` runs) tells the others it lives: a dead process's rows are taken
  over once its heartbeat is ``Tuning.holder_stale`` (4 s) old, a slow live one's never
  are; a holder whose row was taken over anyway stops (its model call is cancelled)
  and commits nothing.
  An adapter whose platform shows a card patch only after a click's own reply declares
  ``updates_cards_after_reply`` (Feishu): the card update after a decision made from
  its clicks then runs in the background (``reply_order``; ``await drain()`` waits for
  it). The worker sweep prunes ``seen_events`` and ``done`` outbox rows past their
  retention, and applies ``settings.retention`` (answers, transcripts, audit rows), at
  most once per housekeeping interval (``await prune_old()`` does it now).
- ``register_adapter(adapter: PlatformAdapter, directory: Directory | None = None)``.
- ``await start_run(agent, prompt, started_by: Identity, origin: Origin, *,
  check_starters=True) -> str`` — the run id; runs the agent's first leg and handles the
  outcome (posts the output to ``origin``, or stores and delivers the request).
  ``started_by`` must be one of the agent's ``starters`` (else ``StartRefusedError``;
  ``check_starters=False`` only for callers authenticated otherwise: API, schedules).
  Unknown agent → ``UnknownAgentError`` listing only the agents ``started_by`` may start.
- ``await start_refusal(agent, who) -> str | None`` — None when ``who`` may start
  ``agent``, else the (audited, ``run_start_refused``) message to show them; adapters
  call it before posting anything. ``await startable_agents(who) -> list[str]``.
- ``await record_start(start: Start, budget=2.0) -> StoredStart | None`` — store a run
  start (``Start(agent, prompt, started_by, origin, run_id=<new>)``) in the run-start
  inbox *before* the platform is told "started"; None if it could not be stored within
  ``budget`` seconds (nothing will ever run from it: say so). ``await
  run_start(stored, tell=False) -> Started`` runs its first leg under the row's lease,
  creating the ``runs`` row idempotently and closing the stored row with the first
  leg's outcome; never raises; ``Started.words`` says why it could not start (starter
  refused, agent removed, no thread). ``await abandon_start(stored)`` closes a stored
  row unused; ``await recover_starts() -> int`` (worker) runs rows left behind by a
  crash and tells a starter whose run cannot start where they asked.
- ``await respond(ref, responder: Identity, action_id, values) -> RespondResult`` —
  outcome ``accepted`` (this answer decided), ``recorded`` (quorum vote, not decided
  yet), ``rejected`` (not allowed / invalid values; ``message`` says why),
  ``already_decided`` ("Already decided by X (Approve) at T.") or ``not_found``.
- ``await cancel(ref, actor: Identity, reason) -> RespondResult`` — the run's starter or
  an approver; the agent is resumed with a ``cancelled`` result.
- ``await attach_files(ref, responder, field_name, files) -> RespondResult`` — stage file
  references ``{platform, id, name, mimetype, size, url}`` for a file field (Feishu
  thread replies); they are used when that person submits without that field.
- ``await expire_due() -> int`` — Dify's exact timeout result for overdue requests.
- ``await remind_and_escalate_due(limit=200) -> int`` — claim due reminders (outbox kind
  ``remind`` → the adapter's ``Reminding.remind(card, ref, text)`` under every copy, and
  a card update showing "Last reminded …") and due escalation steps (``deliver_request``
  of the same card to the step's route, whose approvers may answer from then on, and a
  card update "Escalated to …"); each claim is a compare-and-set on the pending row
  (the chain's ``escalation_step``), audited ``reminded`` / ``escalated``. Spans are
  durations or percentages of the request's own timeout (``waiting``).
  ``serve_forever`` runs it in a loop of its own.
- ``await record_click(click: Click, budget=2.5) -> Recorded | None`` — store a click
  (``Click(platform, ref, responder, action_id, values, kind="respond"|"attach",
  reply_to)``) in the click inbox *before* the platform gets its ack; None if it could
  not be stored within ``budget`` seconds (then nothing will ever be decided from it:
  tell the clicker to click again). ``ClickTooLarge`` for values over 256 KB.
  ``await decide_click(recorded) -> RespondResult`` decides it (``respond`` or, for
  ``attach``, staging files), closing the stored row in the decision's transaction;
  never raises (on trouble the row goes to the worker and the answer says so).
  ``await abandon_click(recorded)`` closes a stored row unused. ``await
  recover_clicks(limit=50) -> int`` (worker) decides rows left behind by a crash or an
  error and tells each clicker through the adapter's ``TellsClickers`` capability; a stored
  click stays with the process that stored it for ``Tuning.click_lease`` (10 s), or
  until that process's heartbeat is stale, and is
  given up after ``Tuning.click_max_attempts`` (5) tries.
  Answers received at or after the deadline are refused ("This request timed out at
  …") and resolve the request ``timeout`` in the same transaction.
- ``await card(ref) -> RequestCard | None``; ``await pending_page(identity, page=1,
  per_page=10) -> PendingPage`` (``cards``, ``total``, ``page``, ``pages``: the open
  requests that person may answer, oldest first, filtered in the query and authorized
  like a click) and ``await pending_for(identity) -> list[RequestCard]`` (all of them);
  ``await find_by_message(platform, message_id) -> str | None``;
  ``await card_for_message(platform, message_id) -> (ref, card) | None`` (both in one read).
- ``await first_seen(platform, key) -> bool`` — one atomic INSERT into ``seen_events``
  shared by every replica: True the first time a platform event / callback / nonce is
  seen, False for a repeat (platform retries reaching another replica).
  ``await first_seen_chain(platform, keys) -> list[bool]`` records several keys in one
  transaction, stopping at the first repeat (Feishu: a callback's nonce and event id).
- ``await audit_refusal(ref, actor, reason, details)`` — an ``adapter_refused`` audit
  entry (outcome ``refused``) for refusals an adapter decides on an authenticated
  request (duplicate or stale callbacks, a card/ref mismatch, an unknown message).
- ``await run_worker_once() -> int`` and ``await serve_forever(stop, poll_interval=2.0)``
  — the durable resume queue, outbox retries, stored clicks and timeout sweeps;
  ``run_worker_once`` runs outbox, clicks and resumes once and returns how many resumes
  ran; ``serve_forever`` runs timeouts, reminders, the outbox, stored clicks and resumes
  as independent loops, so a slow resume never delays a timeout. ``await job_states()``
  / ``await outbox_states()`` count resume jobs / outbox rows by state (health checks).

For the door (``bot.api``, ``bot.mcp``; ``external`` and ``triggers``):

- ``await create_external(ExternalAsk) -> (ExternalView, created)`` — a request with no
  embedded run behind it (idempotent per client key); ``external_view`` /
  ``list_external`` / ``wait_external(client_id, ref, timeout)`` (a long-poll woken by
  the decision's commit, across replicas by ``LISTEN/NOTIFY``: ``waiters``);
  ``cancel_external``, ``answer_external`` (an MCP client's own user, never approvals);
  ``register_webhook_sender(sender)`` for the ``webhook`` outbox kind (~28 h of retries).
- ``await start_triggered_run(agent, prompt, started_by, origin, source=, client_id=)``,
  ``run_view``, ``fire_due_schedules()``, ``reclaim_triggers()``, ``schedule_forever``.

Where things live: ``core.Engine`` is the composition root; it builds each service once,
gives it the services it calls in its constructor, and lends their public methods under
the names above. ``docs/architecture.md`` has the map; in short:

- ``context`` — ``EngineContext`` (database, clock, current settings, ``Tuning``).
- ``committer`` — ``Committer``: ``tx`` (one write transaction), ``read`` (a snapshot,
  no write lock), ``batched`` / ``grouped`` (group commit); after a commit it wakes
  long-polls and hands the side effects it queued to the ``Outbox`` (``on_commit``).
- ``platforms`` — ``Platforms``: adapters, directories and their declared capabilities
  (``ports``: ``Reminding``, ``ReadsClicks``, ``TellsClickers``, ``ClickTraits``).
- ``request_cards`` — ``Cards``: a request with its card as people should see it now.
- ``access`` — ``Authorizer`` (approvers, escalation, sign-off, delegation → ``Allowed``
  or an audited refusal); ``starters`` — ``Starters``; ``pending`` — ``Pending``.
- ``decisions`` — ``Decider`` (respond, cancel, expire: the compare-and-set, deadline
  included); ``resolver`` — ``Resolver`` (system outcomes); ``attachments``,
  ``withdraw``; ``policy`` — the frozen rules (veto, quorum, sign-off, reasons).
- ``clicks`` — ``ClickInbox``: record before the ack, decide from the row, recover
  (``click_writer`` is its group commit; ``reply_order`` the after-reply card updates).
- ``dispatch`` — ``Outbox``: run a claimed side effect with its kind's ``Handler``;
  settle, retry or give up. ``delivery`` — ``DeliveryHandlers`` (the platform calls);
  ``webhooks`` — ``Webhooks``.
- ``runs`` — ``RunStarter``, ``OutcomeRecorder``; ``resumes`` — ``ResumeWorker``,
  ``ResumeJobs``; ``runtimes`` — ``Runtimes``; ``approvals`` — tool approvals.
- ``external`` — ``ExternalRequests`` (API/MCP); ``triggers`` — ``Triggers``;
  ``sweeps`` — ``Reminders`` (reminders, escalation; clocks in ``waiting``);
  ``upkeep`` — ``Housekeeping``; ``queries`` — ``Queries``; ``delegation_chat`` —
  ``Delegations``; ``wakeups`` — ``Wakeups``, ``Background``.
- the functional core, plain functions over a ``Session``: ``store``, ``outbox``,
  ``inbox``, ``worker``, ``leases``, ``policy``, ``authz``, ``values``, ``expiry``,
  ``housekeeping``, ``delegation``, ``routing``, ``waiting``, ``cards``, ``audit_chain``,
  ``queued`` (what a transaction queued for the loops: the commit hook wakes them).

Rules: a decision is a compare-and-set in one transaction with its vote, its audit row,
its resume job and its outbox row. Adapters are called only after commits (card updates,
deliveries, run results) and only for side effects recorded in the ``outbox`` table in
that same transaction (``bot.engine.outbox``): the committing process tries them at once,
and failures or crashes are retried by the worker sweep with backoff, so nothing that
was committed is left untold. Every refused attempt leaves the request unchanged and
is counted in the audit log, on one row per event, person and request
(``occurrences``, first and last seen), so a flood cannot grow the table without limit.
Everything stored from an error text is scrubbed first (``bot.logs.scrub``).
"""

from bot.engine.core import Engine, RuntimeFactory, registry_runtimes, targets_for, utc_now
from bot.engine.inbox import Click, ClickTooLarge, Recorded
from bot.engine.ports import (
    DeliveryError,
    DeliveryRef,
    DeliveryTarget,
    Directory,
    DirectoryUnavailable,
    Identity,
    Origin,
    PlatformAdapter,
    PostKey,
)
from bot.engine.results import (
    EngineError,
    PendingPage,
    RespondResult,
    StartRefusedError,
    UnknownAgentError,
)
from bot.engine.run_starts import Started
from bot.engine.start_rows import Start, StoredStart
from bot.engine.values import InvalidValues, check_answer, check_values

__all__ = [
    "Click",
    "ClickTooLarge",
    "DeliveryError",
    "DeliveryRef",
    "DeliveryTarget",
    "Directory",
    "DirectoryUnavailable",
    "Engine",
    "EngineError",
    "Identity",
    "InvalidValues",
    "Origin",
    "PendingPage",
    "PlatformAdapter",
    "PostKey",
    "Recorded",
    "RespondResult",
    "RuntimeFactory",
    "Start",
    "StartRefusedError",
    "Started",
    "StoredStart",
    "UnknownAgentError",
    "check_answer",
    "check_values",
    "registry_runtimes",
    "targets_for",
    "utc_now",
]
