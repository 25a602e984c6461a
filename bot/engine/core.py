"""The ``Engine``: runs, requests, decisions, resumes and timeouts (see package docs)."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from pydantic import JsonValue
from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from bot.agents.base import AgentRuntime, Outcome
from bot.askhuman.schema import (
    AskHumanSelectedAction,
    AskHumanToolArgs,
    AskHumanToolResult,
    cancelled_result,
    timeout_result,
    unavailable_result,
)
from bot.engine import authz, housekeeping, outbox, store, worker
from bot.engine.cards import already_decided_message, build_card, output_text, to_db_time
from bot.engine.outbox import Attempt, OutboxClaim
from bot.engine.ports import (
    DeliveryError,
    DeliveryRef,
    DeliveryTarget,
    Directory,
    Identity,
    Origin,
    PlatformAdapter,
)
from bot.engine.results import RespondResult, UnknownAgentError
from bot.engine.values import FILE_KEYS, InvalidValues, check_answer, check_values, quoted
from bot.settings import RouteSettings, Settings
from renderers.card import RequestCard
from renderers.text import reminder_text
from storage import Database, Delivery, HumanRequest, OutboxItem, ResumeJob, Run, StagedFile

log = logging.getLogger("askhuman.engine")

T = TypeVar("T")
RuntimeFactory = Callable[[str], AgentRuntime]
"""Build (or look up) the runtime for a configured agent name."""
Clock = Callable[[], dt.datetime]

UPDATE_ROUNDS = 3
"""How often one update_card row re-sends a copy whose version moved on during a call."""
NOT_FOUND = "This request does not exist (the link may be wrong or outdated)."
SYSTEM = Identity("system", "askhuman", "askhuman")


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def registry_runtimes(settings: Settings) -> RuntimeFactory:
    """The default factory: ``bot.agents.build_runtime`` on each configured agent."""

    def build(name: str) -> AgentRuntime:
        from bot.agents import AgentSpec, build_runtime

        agent = settings.agents[name]
        spec = AgentSpec(
            name=name,
            model=agent.model,
            instructions=agent.instructions,
            ask_human=agent.ask_human,
        )
        runtime: AgentRuntime = build_runtime(spec)
        return runtime

    return build


def targets_for(route: RouteSettings, platform: str) -> list[DeliveryTarget]:
    """The recipients admin configuration lists for one platform of a route."""
    if platform == "slack" and route.slack is not None:
        channels = [route.slack.channel] if route.slack.channel else []
        users = route.slack.users
    elif platform == "feishu" and route.feishu is not None:
        channels = [route.feishu.chat_id] if route.feishu.chat_id else []
        users = route.feishu.users
    elif platform == "console":
        return [DeliveryTarget("channel", "console")]
    else:
        return []
    return [DeliveryTarget("channel", c) for c in channels] + [
        DeliveryTarget("user", u) for u in users
    ]


Copies = list[tuple[str, str]]
"""(target key ``"kind id"``, channel) of each delivered copy of a card on one platform."""


def _copies_on(session: Session, request_id: int, platform: str) -> Copies:
    rows = session.execute(
        select(Delivery.target_kind, Delivery.target_id, Delivery.channel)
        .where(Delivery.request_id == request_id, Delivery.platform == platform)
        .order_by(Delivery.id))
    return [(f"{kind} {target}", channel) for kind, target, channel in rows]


class Engine:
    """Platform-agnostic approval lifecycle. All methods are safe to call concurrently."""

    def __init__(
        self,
        database: Database,
        settings: Settings,
        runtimes: RuntimeFactory | None = None,
        clock: Clock | None = None,
        *,
        max_attempts: int = 5,
        backoff_base: float = 2.0,
        backoff_cap: float = 300.0,
        lease_seconds: float = 300.0,
        outbox_max_attempts: int = 8,
        outbox_lease_seconds: float = 120.0,
        background_card_updates: bool = False,
        seen_retention_seconds: float = 86400.0,
        outbox_retention_seconds: float = 7 * 86400.0,
        housekeeping_interval_seconds: float = 600.0,
    ) -> None:
        self.db = database
        self.settings = settings
        self._runtime_factory = runtimes or registry_runtimes(settings)
        self._runtimes: dict[str, AgentRuntime] = {}
        self._clock = clock or utc_now
        self._adapters: dict[str, tuple[PlatformAdapter, Directory | None]] = {}
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.lease = dt.timedelta(seconds=lease_seconds)
        self.outbox_max_attempts = outbox_max_attempts
        self.outbox_lease = dt.timedelta(seconds=outbox_lease_seconds)
        self.background_card_updates = background_card_updates
        """Run the post-commit attempt of ``update_card`` rows as a background task
        instead of awaiting it in ``respond``/``cancel``... (Feishu needs this: its card
        patch waits until the click's reply has been sent)."""
        self.seen_retention = dt.timedelta(seconds=seen_retention_seconds)
        self.outbox_retention = dt.timedelta(seconds=outbox_retention_seconds)
        self.housekeeping_interval = dt.timedelta(seconds=housekeeping_interval_seconds)
        self._last_housekeeping: dt.datetime | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._wake: asyncio.Event | None = None

    # ------------------------------------------------------------------ plumbing

    def register_adapter(
        self, adapter: PlatformAdapter, directory: Directory | None = None
    ) -> None:
        """Attach a platform; requests routed to it are delivered through ``adapter``."""
        self._adapters[adapter.platform] = (adapter, directory)

    def now(self) -> dt.datetime:
        """Naive UTC 'now' as stored in the database."""
        return to_db_time(self._clock())

    async def _tx(self, fn: Callable[[Session], T]) -> T:
        """Run ``fn`` in one transaction on a worker thread (sync SQLAlchemy).

        Side effects ``fn`` put in the outbox are tried right after the commit (and
        only if it committed), so callers cannot forget them and a crash cannot lose
        them: the rows stay claimed until their lease runs out, then the sweep retries.
        """

        def work() -> tuple[T, list[OutboxClaim]]:
            with self.db.transaction() as session:
                result = fn(session)
                claims = outbox.taken(session)
            return result, claims

        result, claims = await asyncio.to_thread(work)
        for claim in claims:
            if self.background_card_updates and claim.kind == "update_card":
                task = asyncio.create_task(self._dispatch(claim))
                self._background.add(task)
                task.add_done_callback(self._background.discard)
            else:
                await self._dispatch(claim)
        return result

    async def drain(self, timeout: float = 10.0) -> None:
        """Wait for post-commit side effects running in the background (shutdown, tests)."""
        if self._background:
            await asyncio.wait(set(self._background), timeout=timeout)

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _runtime(self, agent: str) -> AgentRuntime:
        if agent not in self._runtimes:
            self._runtimes[agent] = self._runtime_factory(agent)
        return self._runtimes[agent]

    def _directory(self, platform: str) -> Directory | None:
        entry = self._adapters.get(platform)
        return entry[1] if entry else None

    # ------------------------------------------------------------------ runs

    async def start_run(
        self, agent: str, prompt: str, started_by: Identity, origin: Origin
    ) -> str:
        """Start ``agent`` on ``prompt``; returns the run id once the first leg is handled.

        The agent's outcome is handled before returning: a final output is posted to
        ``origin``; an ask_human call becomes a stored, delivered request.
        """
        if self.settings.agent(agent) is None:
            known = ", ".join(sorted(self.settings.agents)) or "none"
            raise UnknownAgentError(f"Unknown agent '{agent}'. Configured agents: {known}.")
        runtime = self._runtime(agent)
        run_id = uuid.uuid4().hex
        now = self.now()

        def insert(session: Session) -> None:
            session.add(
                Run(
                    id=run_id, agent=agent, prompt=prompt, status="running",
                    started_by_platform=started_by.platform, started_by_user=started_by.user_id,
                    started_by_name=started_by.display_name, origin_platform=origin.platform,
                    origin_channel=origin.channel, origin_thread=origin.thread,
                    created_at=now, updated_at=now,
                )
            )
            store.audit(session, now, "run_started", run_id=run_id, actor=started_by,
                        details={"agent": agent})

        await self._tx(insert)
        log.info("run started", extra={"run_id": run_id, "agent": agent})
        try:
            outcome = await runtime.run(prompt)
        except Exception as exc:
            log.exception("run failed", extra={"run_id": run_id})
            await self._fail_run(run_id, str(exc) or type(exc).__name__)
            return run_id
        try:
            await self._tx(lambda s: self._apply_outcome(s, run_id, outcome))
        except Exception as exc:
            log.exception("could not store the run outcome", extra={"run_id": run_id})
            await self._fail_run(run_id, str(exc) or type(exc).__name__)
        return run_id

    def _apply_outcome(self, session: Session, run_id: str, outcome: Outcome) -> str | None:
        """Store a run leg's outcome; returns the new request's ref when the agent asked."""
        now = self.now()
        run = session.get(Run, run_id)
        if run is None:
            raise LookupError(f"run {run_id} vanished")
        run.snapshot = dict(outcome.snapshot)
        run.updated_at = now
        if outcome.kind == "output":
            run.status, run.output = "succeeded", outcome.output
            store.audit(session, now, "run_succeeded", run_id=run_id)
            self._enqueue_result(session, run)
            return None
        call = outcome.deferred_call
        if call is None:
            raise ValueError("the agent asked for a human but sent no deferred call")
        args = AskHumanToolArgs.model_validate(call.args)
        route_name = self.settings.agents[run.agent].route
        route = self.settings.routes[route_name]
        deadline = now + dt.timedelta(seconds=route.timeout)
        request = store.create_request(
            session, now, run, call.tool_call_id, args, route_name, route.quorum, deadline
        )
        if route.reminder is not None:
            request.next_reminder_at = now + dt.timedelta(seconds=route.reminder)
        request.reminders_sent = 0
        if route.escalation is not None:
            request.escalate_at = now + dt.timedelta(seconds=route.escalation.after)
        run.status = "waiting"
        store.audit(session, now, "request_created", run_id=run_id, ref=request.ref,
                    details={"route": route_name, "tool_call_id": call.tool_call_id})
        outbox.enqueue(session, now, self.outbox_lease, "deliver_request",
                       request_id=request.id, run_id=run_id, payload={"ref": request.ref})
        return request.ref

    def _enqueue_result(self, session: Session, run: Run) -> None:
        """Queue posting the run's final output or failure where it started.

        The text is fixed now, in the transaction that ended the run, so a retry posts
        exactly what the run ended with.
        """
        if run.status == "succeeded":
            text = output_text(run.output)
        else:
            text = f"The run failed: {run.error}"
        outbox.enqueue(session, self.now(), self.outbox_lease, "post_run_result",
                       run_id=run.id, platform=run.origin_platform,
                       payload={"text": text, "channel": run.origin_channel,
                                "thread": run.origin_thread})

    def _enqueue_update(self, session: Session, request: HumanRequest) -> None:
        """Queue re-rendering every delivered copy of ``request``'s card."""
        outbox.enqueue(session, self.now(), self.outbox_lease, "update_card",
                       request_id=request.id, run_id=request.run_id,
                       payload={"ref": request.ref, "version": request.version})

    async def _fail_run(self, run_id: str, error: str) -> None:
        now = self.now()

        def fail(session: Session) -> None:
            run = session.get(Run, run_id)
            if run is not None:
                run.status, run.error, run.updated_at = "failed", error, now
                self._enqueue_result(session, run)
            store.audit(session, now, "run_failed", outcome="error", run_id=run_id,
                        reason=error)

        await self._tx(fail)

    # ------------------------------------------------------------------ outbox

    async def _dispatch(self, claim: OutboxClaim) -> None:
        """Try one claimed side effect and record how it went; never raises.

        If recording fails too, the row keeps its lease and the sweep retries it later.
        """
        extra = {"outbox_id": claim.item_id, "kind": claim.kind, "attempt": claim.attempts}
        try:
            if claim.attempts > self.outbox_max_attempts:
                attempt = Attempt("the side effect kept crashing the worker", permanent=True)
            else:
                attempt = await self._attempt(claim)
            await self._settle(claim, attempt)
        except worker.LeaseLost:
            log.warning("outbox lease lost; another worker owns the side effect", extra=extra)
        except Exception:
            log.exception("outbox dispatch failed; the sweep retries it", extra=extra)

    async def _attempt(self, claim: OutboxClaim) -> Attempt:
        """Run the side effect once; an unexpected error is a transient failure."""
        handlers = {"deliver_request": self._send_request, "update_card": self._send_update,
                    "post_run_result": self._send_result, "remind": self._send_reminders}
        handler = handlers.get(claim.kind)
        if handler is None:
            return Attempt(f"unknown outbox kind {claim.kind!r}", permanent=True)
        try:
            return await handler(claim)
        except Exception as exc:
            log.exception("outbox side effect crashed", extra={"outbox_id": claim.item_id})
            return Attempt(str(exc) or type(exc).__name__)

    async def _settle(self, claim: OutboxClaim, attempt: Attempt) -> None:
        """Mark the row done, schedule a retry with backoff, or give up (audited)."""
        if attempt.error is None:
            await self._tx(lambda s: outbox.complete(s, claim, self.now(), attempt.payload))
            return
        if attempt.permanent or claim.attempts >= self.outbox_max_attempts:
            await self._tx(partial(self._outbox_give_up, claim=claim, error=attempt.error))
            self._poke()
            return
        delay = worker.backoff(claim.attempts, self.backoff_base, self.backoff_cap)
        payload = claim.payload if attempt.payload is None else attempt.payload

        def retry(session: Session) -> None:
            now = self.now()
            outbox.retry_later(session, claim, now, delay, attempt.error or "", payload)
            store.audit(session, now, "outbox_retry", outcome="error", run_id=claim.run_id,
                        ref=claim.payload.get("ref"), reason=attempt.error,
                        details={"kind": claim.kind, "attempt": claim.attempts,
                                 "delay_seconds": delay.total_seconds()})

        await self._tx(retry)

    def _outbox_give_up(self, session: Session, *, claim: OutboxClaim, error: str) -> None:
        """Fail the row; an undeliverable request is resolved ``unavailable`` in the same
        transaction, so the agent is resumed instead of waiting for its timeout."""
        now = self.now()
        outbox.give_up(session, claim, now, error)
        ref = claim.payload.get("ref")
        store.audit(session, now, "outbox_failed", outcome="error", run_id=claim.run_id,
                    ref=ref, reason=error,
                    details={"kind": claim.kind, "attempt": claim.attempts})
        if claim.kind != "deliver_request" or ref is None or claim.request_id is None:
            return
        if claim.payload.get("route"):
            return  # an escalation's extra copies: the original delivery stands
        if store.deliveries(session, claim.request_id):
            return
        result = unavailable_result(f"The request could not be delivered to anyone ({error}).")
        self._resolve_in(session, ref, result, "unavailable")

    async def _sweep_outbox(self, limit: int) -> int:
        """Retry due side effects (failed earlier, or left behind by a dead process)."""
        done = 0
        while done < limit:
            claim = await self._tx(lambda s: outbox.claim_next(
                s, self.now(), self.outbox_lease, self.db.is_postgres))
            if claim is None:
                break
            await self._dispatch(claim)
            done += 1
        return done

    # ------------------------------------------------------------------ event dedupe, refusals

    async def first_seen(self, platform: str, key: str) -> bool:
        """Record a platform event/callback id; True the first time, False for a repeat.

        One atomic INSERT into ``seen_events`` (shared by every replica), so a platform
        retry that reaches another process is recognized there as well. ``key`` names
        the kind and id, e.g. ``"event:Ev123"``, ``"nonce:abc"``, ``"message:om_1"``.
        Rows are pruned after ``seen_retention_seconds`` by the worker sweep.
        """
        now = self.now()
        return await asyncio.to_thread(housekeeping.insert_seen, self.db, now, platform, key)

    async def audit_refusal(
        self, ref: str | None, actor: Identity | None, reason: str,
        details: Mapping[str, JsonValue],
    ) -> None:
        """Audit a refusal an adapter decided (outcome ``refused``, event ``adapter_refused``).

        For *authenticated* requests only (signature-verified, or from an authenticated
        connection) that never reach the engine: a duplicate or stale callback, a click
        whose reference does not match its card... Unauthenticated junk is only logged
        by the adapters, so it cannot fill the database.
        """
        now = self.now()
        await self._tx(lambda s: store.audit(
            s, now, "adapter_refused", outcome="refused", ref=ref[:64] if ref else None,
            actor=actor, reason=reason[:2000], details=dict(details)))

    async def prune_old(self) -> dict[str, int]:
        """Delete ``seen_events`` past ``seen_retention_seconds`` and ``done`` outbox rows
        past ``outbox_retention_seconds``; returns how many rows of each went."""
        now = self.now()
        self._last_housekeeping = now
        pruned = await asyncio.to_thread(housekeeping.prune, self.db, now, self.seen_retention,
                                         self.outbox_retention)
        if any(pruned.values()):
            log.info("old rows pruned", extra=pruned)
        return pruned

    async def _maybe_prune(self) -> None:
        """``prune_old`` at most once per ``housekeeping_interval_seconds`` (worker sweep)."""
        last = self._last_housekeeping
        if last is not None and self.now() - last < self.housekeeping_interval:
            return
        try:
            await self.prune_old()
        except Exception:
            log.exception("pruning old rows failed; retried at the next interval")

    async def outbox_states(self) -> dict[str, int]:
        """Outbox counts by state (for health checks and tests)."""

        def count(session: Session) -> dict[str, int]:
            out: dict[str, int] = {}
            for state in session.scalars(select(OutboxItem.state)):
                out[state] = out.get(state, 0) + 1
            return out

        return await self._tx(count)

    # ------------------------------------------------------------------ side effects

    async def _send_result(self, claim: OutboxClaim) -> Attempt:
        """post_run_result: post the stored text where the run started."""
        platform = claim.platform or ""
        entry = self._adapters.get(platform)
        if entry is None:
            log.warning("no adapter for the run's origin", extra={"run_id": claim.run_id,
                        "platform": platform})
            return Attempt()
        origin = Origin(platform, claim.payload.get("channel"), claim.payload.get("thread"))
        try:
            await entry[0].post_run_result(origin, str(claim.payload.get("text", "")))
        except DeliveryError as exc:
            return Attempt(str(exc), permanent=True)
        except Exception as exc:
            log.exception("posting the run result failed", extra={"run_id": claim.run_id})
            return Attempt(str(exc) or type(exc).__name__)
        return Attempt()

    async def _send_update(self, claim: OutboxClaim) -> Attempt:
        """update_card: re-render the card as it is now on every delivered copy (idempotent).

        Several update rows of one request may run at once (two votes, a vote and a
        decision, other replicas) and finish out of order. So each copy gets the card
        re-read right before the platform call, a copy that already shows that version
        (``applied`` in this row's or any finished row's payload) is skipped, and after
        each call the version is checked again: if it moved on meanwhile, the newer card
        is sent, so a slow, older call can never leave an older version showing.
        """
        ref = str(claim.payload.get("ref", ""))

        def load(session: Session) -> tuple[int, list[tuple[str, DeliveryRef]]] | None:
            request = store.get_request(session, ref)
            if request is None:
                return None
            rows = store.deliveries(session, request.id)
            return request.id, [(str(d.id), DeliveryRef(d.platform, d.channel, d.message_id))
                                for d in rows]

        found = await self._tx(load)
        if found is None:
            return Attempt()
        request_id, refs = found
        raw = claim.payload.get("applied")
        applied: dict[str, int] = {str(k): v for k, v in (raw or {}).items()
                                   if isinstance(v, int)} if isinstance(raw, dict) else {}
        errors = [error for key, delivery in refs
                  if (error := await self._update_copy(ref, request_id, key, delivery,
                                                       applied)) is not None]
        payload = {**claim.payload, "applied": applied}
        return Attempt("; ".join(errors), payload=payload) if errors else Attempt(payload=payload)

    async def _update_copy(
        self, ref: str, request_id: int, key: str, delivery: DeliveryRef,
        applied: dict[str, int],
    ) -> str | None:
        """Bring one copy to the latest version (see ``_send_update``); records it in
        ``applied``. Returns a transient error to retry, else None."""
        sent: int | None = None
        for _round in range(UPDATE_ROUNDS):

            def latest(session: Session) -> tuple[RequestCard, int] | None:
                loaded = self._load(session, ref)
                if loaded is None:
                    return None
                return loaded[2], outbox.applied_versions(session, request_id).get(key, 0)

            found = await self._tx(latest)
            if found is None:
                return None
            card, elsewhere = found
            if sent is None and max(applied.get(key, 0), elsewhere) >= card.version:
                return None  # this copy already got this version (or a newer one)
            if sent is not None and card.version <= sent:
                return None  # our call was the newest: nothing moved on meanwhile
            error = await self._update_one(card, delivery)
            if error is not None:
                return error
            sent = applied[key] = card.version
        return None

    async def _update_one(self, card: RequestCard, delivery: DeliveryRef) -> str | None:
        """Update one copy; a transient error is returned (retry), a permanent one logged."""
        entry = self._adapters.get(delivery.platform)
        if entry is None:
            return None
        extra = {"ref": card.ref, "platform": delivery.platform,
                 "message_id": delivery.message_id}
        try:
            await entry[0].update(card, delivery)
        except DeliveryError:
            log.warning("card update refused for good", exc_info=True, extra=extra)
        except Exception as exc:
            log.exception("card update failed", extra=extra)
            return f"{delivery.platform} {delivery.message_id}: {exc or type(exc).__name__}"
        return None

    async def _send_request(self, claim: OutboxClaim) -> Attempt:
        """deliver_request: post the card to every configured target that lacks it.

        Targets that already have a message (``deliveries``) or failed for good (kept in
        the payload) are skipped, so a retry never double-posts. No target reached and
        nothing left to retry → give up, which resolves the request ``unavailable``.
        """
        ref = str(claim.payload.get("ref", ""))
        found = await self._tx(lambda s: self._delivery_state(s, ref))
        if found is None:
            return Attempt()  # gone or already resolved: nobody needs the card any more
        request, card, delivered = found
        # An escalation names the escalation route: same card, that route's targets.
        route = self.settings.routes.get(str(claim.payload.get("route") or request.route))
        permanent: dict[str, str] = dict(claim.payload.get("permanent") or {})
        transient: dict[str, str] = {}
        for platform in route.platforms() if route else []:
            entry = self._adapters.get(platform)
            if entry is None:
                permanent[platform] = f"the {platform} platform is not running"
                continue
            for target in targets_for(route, platform) if route else []:
                key = f"{platform} {target.kind} {target.id}"
                if key in delivered or key in permanent:
                    continue
                failure = await self._deliver_one(entry[0], request, card, target)
                if failure is None:
                    delivered.add(key)
                elif failure[0]:
                    permanent[key] = failure[1]
                else:
                    transient[key] = failure[1]
        return self._delivery_verdict(ref, claim.payload, delivered, permanent, transient)

    def _delivery_state(
        self, session: Session, ref: str
    ) -> tuple[HumanRequest, RequestCard, set[str]] | None:
        """The pending request, its card, and the targets that already have it."""
        loaded = self._load(session, ref)
        if loaded is None or loaded[0].status != store.OPEN:
            return None
        request, _run, card = loaded
        done = {f"{d.platform} {d.target_kind} {d.target_id}"
                for d in store.deliveries(session, request.id)}
        return request, card, done

    async def _deliver_one(
        self, adapter: PlatformAdapter, request: HumanRequest, card: RequestCard,
        target: DeliveryTarget,
    ) -> tuple[bool, str] | None:
        """Post to one target and record it; None on success, else (permanent, error)."""
        try:
            ref = await adapter.deliver(card, target)
        except DeliveryError as exc:
            return True, str(exc)
        except Exception as exc:
            log.exception("adapter crashed while delivering", extra={"ref": request.ref})
            return False, str(exc) or type(exc).__name__
        await self._tx(partial(self._store_delivery, request=request, target=target, ref=ref,
                               version=card.version))
        return None

    @staticmethod
    def _delivery_verdict(
        ref: str, payload: dict[str, Any], delivered: set[str], permanent: dict[str, str],
        transient: dict[str, str],
    ) -> Attempt:
        failures = [f"{key}: {error}" for key, error in {**permanent, **transient}.items()]
        if failures:
            log.warning("delivery failures", extra={"ref": ref, "failures": failures})
        if transient:
            return Attempt("; ".join(failures), payload={**payload, "permanent": permanent})
        if delivered:
            return Attempt()
        return Attempt("; ".join(failures) or "the route has no recipients", permanent=True)

    # ------------------------------------------------------------------ delivery records

    def _store_delivery(
        self, session: Session, *, request: HumanRequest, target: DeliveryTarget,
        ref: DeliveryRef, version: int,
    ) -> None:
        """Record where the card went; if the request changed while it was being posted
        (a vote, a decision on another copy), queue an update so this copy is not stale.

        The request row is locked on PostgreSQL, so either the decision's own card update
        sees this delivery or this transaction sees the decision.
        """
        now = self.now()
        current = store.get_request(session, request.ref, lock=self.db.is_postgres)
        if current is not None and current.version != version:
            self._enqueue_update(session, current)
        session.add(Delivery(
            request_id=request.id, platform=ref.platform, target_kind=target.kind,
            target_id=target.id, channel=ref.channel, message_id=ref.message_id, created_at=now,
        ))
        store.audit(session, now, "delivered", run_id=request.run_id, ref=request.ref,
                    details={"platform": ref.platform, "channel": ref.channel,
                             "message_id": ref.message_id})

    def _load(
        self, session: Session, ref: str
    ) -> tuple[HumanRequest, Run, RequestCard] | None:
        request = store.get_request(session, ref)
        if request is None:
            return None
        run = session.get(Run, request.run_id)
        if run is None:
            return None
        return request, run, build_card(request, run.agent, store.vote_count(session, request.id))

    # ------------------------------------------------------------------ answers

    async def card(self, ref: str) -> RequestCard | None:
        """The request as it should be shown now, or None for an unknown ref."""
        loaded = await self._tx(lambda s: self._load(s, ref))
        return loaded[2] if loaded else None

    async def _refuse(
        self, outcome: Any, message: str, ref: str, actor: Identity, event: str,
        card: RequestCard | None = None, run_id: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> RespondResult:
        """Audit a refused attempt (the request itself is left untouched)."""
        now = self.now()
        await self._tx(lambda s: store.audit(
            s, now, event, outcome="refused", run_id=run_id, ref=ref[:64], actor=actor,
            reason=message, details=details))
        log.info("attempt refused", extra={"ref": ref, "event": event, "reason": message})
        return RespondResult(outcome, message, card)

    def _escalation_of(self, request: HumanRequest) -> RouteSettings | None:
        """The route ``request`` was escalated to (None before escalation)."""
        if request.escalated_at is None or not request.escalation_route:
            return None
        return self.settings.routes.get(request.escalation_route)

    async def _refusal(
        self, request: HumanRequest, route: RouteSettings, who: Identity, starter: Identity,
        copies: Copies,
    ) -> str | None:
        """None when ``who`` may act: an approver of ``route`` or, once the request was
        escalated, of the escalation route (with ``route``'s self-approval rule).

        ``channel_members`` of each route counts the chats that route's own targets got
        the card in, so escalating into a big channel never widens the original route.
        """
        directory = self._directory(who.platform)
        escalation = self._escalation_of(request)
        theirs = {f"{t.kind} {t.id}" for t in targets_for(escalation, who.platform)
                  } if escalation is not None else set()
        mine = {f"{t.kind} {t.id}" for t in targets_for(route, who.platform)}
        own = [channel for key, channel in copies if key in mine or key not in theirs]
        reason = await authz.refusal(route, who, starter, dict.fromkeys(own), directory)
        if reason is None or escalation is None:
            return reason
        extra = escalation.model_copy(update={"allow_self_approval": route.allow_self_approval})
        other = [channel for key, channel in copies if key in theirs]
        if await authz.refusal(extra, who, starter, dict.fromkeys(other), directory) is None:
            return None
        return reason

    async def _authorize(
        self, ref: str, who: Identity, event: str
    ) -> tuple[HumanRequest, Run, RequestCard, dict[str, list[Any]]] | RespondResult:
        """Load the request and check the person may act on it (before any values)."""

        def load(session: Session) -> Any:
            loaded = self._load(session, ref)
            if loaded is None:
                return None
            request = loaded[0]
            channels = _copies_on(session, request.id, who.platform)
            staged = store.staged_files(session, request.id, who)
            return (*loaded, channels, staged)

        found = await self._tx(load)
        if found is None:
            return await self._refuse("not_found", NOT_FOUND, ref, who, f"{event}_unknown_ref")
        request, run, card, channels, staged = found
        if request.status != store.OPEN:
            return await self._refuse("already_decided", already_decided_message(request), ref,
                                      who, f"{event}_already_decided", card, run.id)
        route = self.settings.routes.get(request.route)
        reason: str | None
        if route is None:
            reason = "This request's route is no longer configured; ask an admin."
        else:
            reason = await self._refusal(request, route, who, store.starter(run), channels)
        if reason is not None:
            return await self._refuse("rejected", reason, ref, who, f"{event}_unauthorized",
                                      card, run.id)
        return request, run, card, staged

    async def respond(
        self, ref: str, responder: Identity, action_id: str, values: Mapping[str, JsonValue]
    ) -> RespondResult:
        """A person answered: authorize, validate, then compare-and-set the decision."""
        checked = await self._authorize(ref, responder, "respond")
        if isinstance(checked, RespondResult):
            return checked
        _request, run, card, staged = checked
        args = card.args
        merged: dict[str, Any] = dict(values)
        for name, files in staged.items():
            if not merged.get(name):
                merged[name] = files
        try:
            action, clean = check_answer(args, action_id, merged)
        except InvalidValues as exc:
            return await self._refuse("rejected", str(exc), ref, responder,
                                      "respond_invalid", card, run.id,
                                      {"action_id": action_id[:200]})
        selected = AskHumanSelectedAction(id=action.id, label=action.label)
        result = AskHumanToolResult(status="submitted", action=selected, values=clean)
        answer = await self._tx(lambda s: self._decide(s, ref, responder, result))
        if answer.outcome in ("accepted", "recorded"):
            self._poke()  # the card update was already tried right after the commit
            answer = RespondResult(answer.outcome, answer.message, await self.card(ref))
        return answer

    def _decide(
        self, session: Session, ref: str, who: Identity, result: AskHumanToolResult
    ) -> RespondResult:
        """One transaction: lock, re-check, vote, and decide when the quorum is met."""
        now = self.now()
        request = store.get_request(session, ref, lock=self.db.is_postgres)
        assert request is not None and result.action is not None
        action = result.action
        if request.status != store.OPEN:
            message = already_decided_message(request)
            store.audit(session, now, "respond_already_decided", outcome="refused",
                        run_id=request.run_id, ref=ref, actor=who, reason=message)
            return RespondResult("already_decided", message)
        previous = store.existing_vote(session, request.id, who)
        if previous is not None:
            message = (f"Your answer ({previous.action_id}) is already recorded; "
                       "waiting for the other approvers.")
            store.audit(session, now, "respond_duplicate_vote", outcome="refused",
                        run_id=request.run_id, ref=ref, actor=who, reason=message)
            return RespondResult("rejected", message)
        votes = store.record_vote(session, now, request, who, action.id, result.values)
        if votes < request.quorum:
            store.bump_version(session, now, request)
            store.audit(session, now, "vote_recorded", run_id=request.run_id, ref=ref,
                        actor=who, details={"action_id": action.id, "votes": votes})
            self._enqueue_update(session, request)
            return RespondResult("recorded", f"Recorded, {votes} of {request.quorum} "
                                 f"needed for {quoted(action.label)}.")
        if not store.resolve(session, now, request, result, who):
            raise RuntimeError("compare-and-set lost under a row lock")  # rolls back the vote
        store.audit(session, now, "decided", run_id=request.run_id, ref=ref, actor=who,
                    details={"action_id": action.id, "values": result.values})
        self._enqueue_update(session, request)
        log.info("request decided", extra={"ref": ref, "action_id": action.id})
        return RespondResult("accepted", f"Thanks, your answer ({action.label}) was recorded.")

    async def attach_files(
        self, ref: str, responder: Identity, field_name: str, files: Sequence[Mapping[str, Any]]
    ) -> RespondResult:
        """Stage file references for a file field until the person submits the form."""
        checked = await self._authorize(ref, responder, "attach")
        if isinstance(checked, RespondResult):
            return checked
        request, run, card, staged = checked
        field = next((f for f in card.args.fields if f.name == field_name), None)
        try:
            if field is None or field.type not in ("file", "file-list"):
                raise InvalidValues(f"This request has no file field {quoted(field_name)}")
            cleaned = [{k: f.get(k) for k in FILE_KEYS} for f in files]
            combined = staged.get(field_name, []) + cleaned
            check_values(card.args.model_copy(update={"fields": [field]}),
                         {field_name: combined})
        except InvalidValues as exc:
            return await self._refuse("rejected", str(exc), ref, responder, "attach_invalid",
                                      card, run.id)
        now = self.now()

        def stage(session: Session) -> None:
            session.add(StagedFile(request_id=request.id, platform=responder.platform,
                                   user_id=responder.user_id, field_name=field_name,
                                   files=cleaned, created_at=now))
            store.audit(session, now, "files_attached", run_id=run.id, ref=ref, actor=responder,
                        details={"field": field_name, "count": len(cleaned)})

        await self._tx(stage)
        label = field.label if field else field_name
        return RespondResult("recorded", f"Attached {len(cleaned)} file(s) to {quoted(label)}; "
                             "submit the form to send them.", card)

    async def cancel(self, ref: str, actor: Identity, reason: str) -> RespondResult:
        """Withdraw a pending request; the agent is resumed with a ``cancelled`` result."""

        def load(session: Session) -> Any:
            loaded = self._load(session, ref)
            if loaded is None:
                return None
            channels = _copies_on(session, loaded[0].id, actor.platform)
            return (*loaded, channels)

        found = await self._tx(load)
        if found is None:
            return await self._refuse("not_found", NOT_FOUND, ref, actor, "cancel_unknown_ref")
        request, run, card, channels = found
        route = self.settings.routes.get(request.route)
        is_starter = (run.started_by_platform, run.started_by_user) == (
            actor.platform, actor.user_id)
        if not is_starter and actor != SYSTEM:
            refusal = authz.NOT_ALLOWED if route is None else await self._refusal(
                request, route.model_copy(update={"allow_self_approval": True}), actor,
                store.starter(run), channels)
            if refusal is not None:
                return await self._refuse("rejected", "You are not allowed to cancel this "
                                          "request.", ref, actor, "cancel_unauthorized", card,
                                          run.id)
        who = actor.display_name or actor.user_id
        result = cancelled_result(f"Cancelled by {who}: {reason}" if reason else
                                  f"Cancelled by {who}.")
        return await self._resolve_system(ref, result, "cancelled", actor)

    async def _resolve_system(
        self, ref: str, result: AskHumanToolResult, event: str, actor: Identity | None = None
    ) -> RespondResult:
        """Compare-and-set a non-human outcome (timeout, cancel, unavailable)."""
        answer = await self._tx(lambda s: self._resolve_in(s, ref, result, event, actor))
        if answer.outcome == "accepted":
            self._poke()
        return RespondResult(answer.outcome, answer.message, await self.card(ref))

    def _resolve_in(
        self, session: Session, ref: str, result: AskHumanToolResult, event: str,
        actor: Identity | None = None,
    ) -> RespondResult:
        """The compare-and-set itself, inside the caller's transaction (queues the resume
        and the card update with it)."""
        now = self.now()
        request = store.get_request(session, ref, lock=self.db.is_postgres)
        if request is None:
            return RespondResult("not_found", NOT_FOUND)
        if not store.resolve(session, now, request, result, actor):
            message = already_decided_message(request)
            store.audit(session, now, f"{event}_too_late", outcome="refused",
                        run_id=request.run_id, ref=ref, actor=actor, reason=message)
            return RespondResult("already_decided", message)
        store.audit(session, now, event, run_id=request.run_id, ref=ref, actor=actor,
                    reason=result.message)
        self._enqueue_update(session, request)
        log.info("request resolved", extra={"ref": ref, "status": result.status})
        return RespondResult("accepted", result.message or event)

    async def expire_due(self) -> int:
        """Give every overdue pending request Dify's timeout result; returns how many."""
        now = self.now()

        def due(session: Session) -> list[str]:
            query = (select(HumanRequest.ref)
                     .where(HumanRequest.status == store.OPEN, HumanRequest.deadline <= now)
                     .order_by(HumanRequest.deadline).limit(200))
            return list(session.scalars(query))

        expired = 0
        for ref in await self._tx(due):
            answer = await self._resolve_system(ref, timeout_result(), "timed_out")
            expired += answer.outcome == "accepted"
        return expired

    # ------------------------------------------------------------------ reminders, escalation

    async def remind_and_escalate_due(self, limit: int = 200) -> int:
        """Claim due reminders and escalations of pending requests; returns how many.

        Each one is a compare-and-set on the request row (``status`` still pending and
        ``next_reminder_at`` / ``escalate_at`` unchanged since it was read; on PostgreSQL
        the rows are also picked with ``FOR UPDATE SKIP LOCKED``), committed with its
        outbox row (``remind``, or ``deliver_request`` to the escalation route) and its
        audit row (``reminded`` / ``escalated``). So several processes sweeping at once
        remind once, and a request decided first is never reminded or escalated.
        """
        return await self._tx(partial(self._claim_due, limit=limit))

    def _claim_due(self, session: Session, *, limit: int) -> int:
        now = self.now()
        not_overdue = or_(HumanRequest.deadline.is_(None), HumanRequest.deadline > now)
        claimed = 0
        for column in (HumanRequest.next_reminder_at, HumanRequest.escalate_at):
            query = (select(HumanRequest)
                     .where(HumanRequest.status == store.OPEN, column <= now, not_overdue)
                     .order_by(column).limit(limit))
            if self.db.is_postgres:
                query = query.with_for_update(skip_locked=True)
            for request in session.scalars(query).all():
                if column is HumanRequest.next_reminder_at:
                    claimed += self._claim_reminder(session, now, request)
                else:
                    claimed += self._claim_escalation(session, now, request)
        return claimed

    def _claim_reminder(self, session: Session, now: dt.datetime, request: HumanRequest) -> bool:
        """Compare-and-set one due reminder; schedule the next one (or none)."""
        route = self.settings.routes.get(request.route)
        old = request.next_reminder_at
        sent = request.reminders_sent + 1
        remind = (route is not None and route.reminder is not None
                  and sent <= route.max_reminders)
        upcoming: dt.datetime | None = None
        if remind and route is not None and route.reminder is not None and (
                sent < route.max_reminders):
            assert old is not None
            step = dt.timedelta(seconds=route.reminder)
            upcoming = old + step if old + step > now else now + step  # skip missed periods
            if request.deadline is not None and upcoming >= request.deadline:
                upcoming = None
        changed = store.rowcount(session.execute(
            update(HumanRequest)
            .where(HumanRequest.id == request.id, HumanRequest.status == store.OPEN,
                   HumanRequest.next_reminder_at == old)
            .values(next_reminder_at=upcoming,
                    reminders_sent=HumanRequest.reminders_sent + int(remind), updated_at=now)
            .execution_options(synchronize_session=False)))
        if changed != 1 or not remind:
            return False  # someone else claimed it, it was decided, or reminders were removed
        run = session.get(Run, request.run_id)
        card = build_card(request, run.agent if run else "agent")
        outbox.enqueue(session, now, self.outbox_lease, "remind", request_id=request.id,
                       run_id=request.run_id,
                       payload={"ref": request.ref, "number": sent,
                                "text": reminder_text(card, sent)})
        store.audit(session, now, "reminded", run_id=request.run_id, ref=request.ref,
                    details={"number": sent, "next_reminder_at":
                             upcoming.isoformat() if upcoming else None})
        return True

    def _claim_escalation(self, session: Session, now: dt.datetime,
                          request: HumanRequest) -> bool:
        """Compare-and-set one due escalation; queue delivering the card to its route."""
        route = self.settings.routes.get(request.route)
        escalation = route.escalation if route is not None else None
        target = escalation.route if escalation is not None else None
        if target is not None and target not in self.settings.routes:
            target = None
        changed = store.rowcount(session.execute(
            update(HumanRequest)
            .where(HumanRequest.id == request.id, HumanRequest.status == store.OPEN,
                   HumanRequest.escalate_at == request.escalate_at,
                   HumanRequest.escalated_at.is_(None))
            .values(escalate_at=None, escalated_at=now if target else None,
                    escalation_route=target, updated_at=now)
            .execution_options(synchronize_session=False)))
        if changed != 1 or target is None:
            return False
        outbox.enqueue(session, now, self.outbox_lease, "deliver_request",
                       request_id=request.id, run_id=request.run_id,
                       payload={"ref": request.ref, "route": target})
        store.audit(session, now, "escalated", run_id=request.run_id, ref=request.ref,
                    details={"from_route": request.route, "to_route": target})
        log.info("request escalated", extra={"ref": request.ref, "route": target})
        return True

    async def _send_reminders(self, claim: OutboxClaim) -> Attempt:
        """remind: post the reminder under every delivered copy that lacks it.

        Skipped once the request is no longer pending. Copies already reminded are kept
        in the payload, so a retry never reminds twice; adapters without ``remind`` are
        skipped.
        """
        ref = str(claim.payload.get("ref", ""))
        text = str(claim.payload.get("text", ""))

        def load(session: Session) -> tuple[RequestCard, list[DeliveryRef]] | None:
            loaded = self._load(session, ref)
            if loaded is None or loaded[0].status != store.OPEN:
                return None
            rows = store.deliveries(session, loaded[0].id)
            return loaded[2], [DeliveryRef(d.platform, d.channel, d.message_id) for d in rows]

        found = await self._tx(load)
        if found is None:
            return Attempt()
        card, copies = found
        done: list[str] = list(claim.payload.get("done") or [])
        errors: list[str] = []
        for copy in copies:
            key = f"{copy.platform} {copy.message_id}"
            entry = self._adapters.get(copy.platform)
            remind = getattr(entry[0], "remind", None) if entry else None
            if key in done or remind is None:
                continue
            try:
                await remind(card, copy, text)
            except DeliveryError as exc:
                log.warning("reminder refused for good", extra={"ref": ref, "copy": key,
                                                                "error": str(exc)})
            except Exception as exc:
                log.exception("reminder failed", extra={"ref": ref, "copy": key})
                errors.append(f"{key}: {exc or type(exc).__name__}")
                continue
            done.append(key)
        if errors:
            return Attempt("; ".join(errors), payload={**claim.payload, "done": done})
        return Attempt()

    async def pending_for(self, identity: Identity) -> list[RequestCard]:
        """Open requests ``identity`` may answer (oldest first)."""

        def load(session: Session) -> list[tuple[HumanRequest, Run, RequestCard, Copies]]:
            rows = session.scalars(select(HumanRequest).where(HumanRequest.status == store.OPEN)
                                   .order_by(HumanRequest.id).limit(200)).all()
            out = []
            for request in rows:
                loaded = self._load(session, request.ref)
                if loaded is not None:
                    channels = _copies_on(session, request.id, identity.platform)
                    out.append((*loaded, channels))
            return out

        cards = []
        for request, run, card, channels in await self._tx(load):
            route = self.settings.routes.get(request.route)
            if route is not None and await self._refusal(
                request, route, identity, store.starter(run), channels) is None:
                cards.append(card)
        return cards

    async def find_by_message(self, platform: str, message_id: str) -> str | None:
        """The ref of the request delivered as ``message_id`` on ``platform``."""

        def find(session: Session) -> str | None:
            query = (select(HumanRequest.ref).join(Delivery, Delivery.request_id == HumanRequest.id)
                     .where(Delivery.platform == platform, Delivery.message_id == message_id))
            return session.scalars(query).first()

        return await self._tx(find)

    # ------------------------------------------------------------------ resume worker

    async def run_worker_once(self, limit: int = 50) -> int:
        """Process due resume jobs until none is left (or ``limit``); returns how many ran.

        First it retries due outbox side effects (up to ``limit``; not counted in the
        return value), so a delivery that gave up resolves ``unavailable`` and its resume
        runs in the same sweep.
        """
        await self._sweep_outbox(limit)
        await self._maybe_prune()
        done = 0
        while done < limit:
            claim = await self._tx(self._claim)
            if claim is None:
                break
            await self._process(claim)
            done += 1
        return done

    def _claim(self, session: Session) -> worker.Claim | None:
        return worker.claim_next(session, self.now(), self.lease, self.db.is_postgres)

    async def _process(self, claim: worker.Claim) -> None:
        """Resume one run with its request's result; success commits with the job's end."""

        def load(session: Session) -> tuple[Run, HumanRequest]:
            run, request = session.get(Run, claim.run_id), session.get(HumanRequest,
                                                                       claim.request_id)
            assert run is not None and request is not None
            return run, request

        run, request = await self._tx(load)
        extra = {"run_id": run.id, "ref": request.ref, "attempt": claim.attempts}
        if claim.attempts > self.max_attempts:
            await self._give_up(claim, run.id, "the resume kept crashing the worker")
            return
        try:
            result = AskHumanToolResult.model_validate(request.result)
            runtime = self._runtime(run.agent)
            outcome = await runtime.resume(dict(run.snapshot or {}),
                                           {request.tool_call_id: result})
        except Exception as exc:
            log.warning("resume failed", extra={**extra, "error": str(exc)})
            await self._retry_or_fail(claim, run.id, str(exc) or type(exc).__name__)
            return

        def commit(session: Session) -> None:
            worker.complete(session, claim, self.now())
            self._apply_outcome(session, run.id, outcome)
            store.audit(session, self.now(), "resumed", run_id=run.id, ref=request.ref,
                        details={"attempt": claim.attempts, "status": result.status})

        try:
            await self._tx(commit)  # also delivers the follow-up request / posts the output
        except worker.LeaseLost:
            log.warning("lease lost; another worker owns the resume", extra=extra)
            return
        except Exception as exc:
            log.exception("storing the resume outcome failed", extra=extra)
            await self._retry_or_fail(claim, run.id, str(exc) or type(exc).__name__)
            return
        log.info("run resumed", extra=extra)

    async def _retry_or_fail(self, claim: worker.Claim, run_id: str, error: str) -> None:
        if claim.attempts >= self.max_attempts:
            await self._give_up(claim, run_id, error)
            return
        delay = worker.backoff(claim.attempts, self.backoff_base, self.backoff_cap)

        def retry(session: Session) -> None:
            now = self.now()
            worker.retry_later(session, claim, now, delay, error)
            store.audit(session, now, "resume_retry", outcome="error", run_id=run_id,
                        reason=error, details={"attempt": claim.attempts,
                                               "delay_seconds": delay.total_seconds()})

        try:
            await self._tx(retry)
        except worker.LeaseLost:
            log.warning("lease lost while scheduling a retry", extra={"run_id": run_id})

    async def _give_up(self, claim: worker.Claim, run_id: str, error: str) -> None:
        message = f"resuming failed after {claim.attempts} attempt(s): {error}"

        def fail(session: Session) -> None:
            now = self.now()
            worker.give_up(session, claim, now, error)
            run = session.get(Run, run_id)
            if run is not None:
                run.status, run.error, run.updated_at = "failed", message, now
                self._enqueue_result(session, run)
            store.audit(session, now, "resume_failed", outcome="error", run_id=run_id,
                        reason=message)

        try:
            await self._tx(fail)
        except worker.LeaseLost:
            return

    async def serve_forever(self, stop: asyncio.Event, poll_interval: float = 2.0) -> None:
        """Loop timeouts and resume jobs until ``stop`` is set; decisions wake it early."""
        self._wake = asyncio.Event()
        while not stop.is_set():
            self._wake.clear()
            try:
                await self.expire_due()
                await self.remind_and_escalate_due()
                await self.run_worker_once()
            except Exception:
                log.exception("worker sweep failed; retrying after the poll interval")
            waiters = {asyncio.ensure_future(stop.wait()),
                       asyncio.ensure_future(self._wake.wait())}
            await asyncio.wait(waiters, timeout=poll_interval,
                                            return_when=asyncio.FIRST_COMPLETED)
            for task in waiters:
                task.cancel()

    async def job_states(self) -> dict[str, int]:
        """Resume-queue counts by state (for health checks and tests)."""

        def count(session: Session) -> dict[str, int]:
            out: dict[str, int] = {}
            for state in session.scalars(select(ResumeJob.state)):
                out[state] = out.get(state, 0) + 1
            return out

        return await self._tx(count)
