"""Delivery: the platform calls behind each outbox kind, safe to repeat.

Every handler may run again after a crash, a lease expiry or a transient failure, so
each one remembers in the outbox payload (or the ``deliveries`` table) what already
happened and skips it. What it cannot remember is a platform call that succeeded just
before the process died: for that, every post carries a ``PostKey`` (stable across
retries) and the adapter makes the post idempotent with it (Slack message metadata
looked up before a retry, Feishu's ``uuid``). A handler returns an ``Attempt``;
``dispatch`` decides whether to retry or give up.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from bot.engine import card_rows, outbox, policy, store, tracing
from bot.engine.cards import as_utc
from bot.engine.committer import Committer, log
from bot.engine.context import EngineContext
from bot.engine.dispatch import Handler
from bot.engine.outbox import Attempt, OutboxClaim
from bot.engine.platforms import Platforms
from bot.engine.ports import (
    DeliveryError,
    DeliveryRef,
    DeliveryTarget,
    Origin,
    PlatformAdapter,
    PostKey,
    delivery_reason,
)
from bot.engine.request_cards import Cards
from bot.engine.targets import targets_for
from renderers.card import RequestCard
from storage import Delivery, HumanRequest

UPDATE_ROUNDS = 3
"""How often one update_card row re-sends a copy whose version moved on during a call."""


class DeliveryHandlers:
    """``deliver_request``, ``update_card``, ``post_run_result`` and ``remind`` handlers."""

    def __init__(self, ctx: EngineContext, committer: Committer, cards: Cards,
                 platforms: Platforms) -> None:
        self._ctx = ctx
        self._committer = committer
        self._cards = cards
        self._platforms = platforms

    def handlers(self) -> dict[str, Handler]:
        """The outbox kinds this class sends, for the ``Outbox`` registry."""
        return {"deliver_request": Handler(self.send_request),
                "update_card": Handler(self.send_update),
                "post_run_result": Handler(self.send_result),
                "remind": Handler(self.send_reminders)}

    # ------------------------------------------------------------------ deliver_request

    async def send_request(self, claim: OutboxClaim) -> Attempt:
        """deliver_request: post the card to every configured target that lacks it.

        Targets that already have a message (``deliveries``) or failed for good (kept in
        the payload) are skipped, so a retry never double-posts. No target reached and
        nothing left to retry → give up, which resolves the request ``unavailable``.
        """
        ref = str(claim.payload.get("ref", ""))
        found = await self._committer.read(lambda s: self._delivery_state(s, ref))
        if found is None:
            return Attempt()  # gone or already resolved: nobody needs the card any more
        request, card, delivered = found
        # An escalation names the escalation route: same card, that route's targets.
        # Targets come from the request's frozen policy (a reload never redirects it).
        name = str(claim.payload.get("route") or request.route)
        rules = policy.of(request, self._ctx.settings)
        settings = self._ctx.settings
        route = rules.route_named(name, settings) if rules else settings.routes.get(name)
        permanent: dict[str, str] = dict(claim.payload.get("permanent") or {})
        reasons: dict[str, str] = dict(claim.payload.get("reasons") or {})
        transient: dict[str, str] = {}
        for platform in route.platforms() if route else []:
            adapter = self._platforms.adapter(platform)
            if adapter is None:
                permanent[platform] = f"the {platform} platform is not running"
                reasons[platform] = f"askhuman's {platform} connection is not running."
                continue
            for target in targets_for(route, platform) if route else []:
                key = f"{platform} {target.kind} {target.id}"
                if key in delivered or key in permanent:
                    continue
                name = f"card:{ref}:{platform}:{target.kind}:{target.id}"
                failure = await self._deliver_one(adapter, request, card, target,
                                                  post_key(claim, name))
                if failure is None:
                    delivered.add(key)
                    continue
                is_permanent, error, reasons[key] = failure
                (permanent if is_permanent else transient)[key] = error
        payload = {**claim.payload, "reasons": reasons}
        return self._delivery_verdict(ref, payload, delivered, permanent, transient)

    def _delivery_state(
        self, session: Session, ref: str
    ) -> tuple[HumanRequest, RequestCard, set[str]] | None:
        """The pending request, its card, and the targets that already have it."""
        loaded = self._cards.load(session, ref)
        if loaded is None or loaded[0].status != store.OPEN:
            return None
        request, _run, card = loaded
        done = {f"{d.platform} {d.target_kind} {d.target_id}"
                for d in store.deliveries(session, request.id)}
        return request, card, done

    async def _deliver_one(
        self, adapter: PlatformAdapter, request: HumanRequest, card: RequestCard,
        target: DeliveryTarget, key: PostKey,
    ) -> tuple[bool, str, str] | None:
        """Post to one target and record it; None on success, else (permanent, error,
        reason): the error keeps the platform's code (log, audit), the reason is words."""
        span = tracing.start("askhuman.request.delivered", request.trace_context, {
            "askhuman.request.ref": request.ref, "askhuman.platform": adapter.platform,
            "askhuman.target.kind": target.kind, "askhuman.target.id": target.id,
            "askhuman.card.version": card.version}, client=True)
        try:
            ref = await adapter.deliver(card, target, key=key)
        except DeliveryError as exc:
            tracing.finish(span, exc, attributes={"askhuman.delivery.permanent": True})
            return True, str(exc) or type(exc).__name__, delivery_reason(exc)
        except Exception as exc:
            tracing.finish(span, exc)
            log.exception("adapter crashed while delivering", extra={"ref": request.ref})
            return False, str(exc) or type(exc).__name__, delivery_reason(exc)
        tracing.finish(span, attributes={"askhuman.message.channel": ref.channel,
                                         "askhuman.message.id": ref.message_id,
                                         "askhuman.message.reused": ref.reused})
        await self._committer.tx(partial(self._store_delivery, request=request, target=target,
                                         ref=ref, version=card.version))
        return None

    @staticmethod
    def _delivery_verdict(
        ref: str, payload: dict[str, Any], delivered: set[str], permanent: dict[str, str],
        transient: dict[str, str],
    ) -> Attempt:
        """Retry while some target failed transiently; give up only if nobody got it.

        The attempt's ``reason`` joins the words of every failed target (deduplicated),
        for the ``unavailable`` result; its ``error`` keeps the platforms' codes.
        """
        failures = [f"{key}: {error}" for key, error in {**permanent, **transient}.items()]
        if failures:
            log.warning("delivery failures", extra={"ref": ref, "failures": failures})
        said: dict[str, str] = payload.get("reasons") or {}
        words = " ".join(dict.fromkeys(said[k] for k in {**permanent, **transient} if k in said))
        if transient:
            return Attempt("; ".join(failures), payload={**payload, "permanent": permanent},
                           reason=words or None)
        if delivered:
            return Attempt()
        if not failures:
            return Attempt("the route has no recipients", permanent=True,
                           reason="The route has no recipients configured.")
        return Attempt("; ".join(failures), permanent=True, reason=words or None)

    def _store_delivery(
        self, session: Session, *, request: HumanRequest, target: DeliveryTarget,
        ref: DeliveryRef, version: int,
    ) -> None:
        """Record where the card went; if the request changed while it was being posted
        (a vote, a decision on another copy), queue an update so this copy is not stale.

        The request row is locked on PostgreSQL, so either the decision's own card update
        sees this delivery or this transaction sees the decision. A card found from an
        interrupted earlier try (``ref.reused``) may show an older version: updated too.
        """
        now = self._ctx.now()
        current = store.get_request(session, request.ref, lock=self._ctx.db.is_postgres)
        if current is not None and (current.version != version or ref.reused):
            self._cards.enqueue_update(session, current)
        session.add(Delivery(
            request_id=request.id, platform=ref.platform, target_kind=target.kind,
            target_id=target.id, channel=ref.channel, message_id=ref.message_id, created_at=now,
        ))
        store.audit(session, now, "delivered", run_id=request.run_id, ref=request.ref,
                    details={"platform": ref.platform, "channel": ref.channel,
                             "message_id": ref.message_id, "reused": ref.reused})

    # ------------------------------------------------------------------ update_card

    async def send_update(self, claim: OutboxClaim) -> Attempt:
        """update_card: re-render the card as it is now on every delivered copy (idempotent).

        Several update rows of one request may run at once (two votes, a vote and a
        decision, other replicas) and finish out of order. So a copy that already shows
        the current version (``applied`` in this row's or any finished row's payload) is
        skipped, and after each call the version is read again: if it moved on
        meanwhile, the newer card is read and sent, so a slow, older call can never
        leave an older version showing. One snapshot read gives the request, its card,
        its copies and what they show; each call of a pending card is then followed by
        a one-column read. A decided card needs none: every change that moves a version
        on (a vote, a reminder, an escalation, the decision itself) is made only while
        the request is pending (``store.bump_version``), so nothing can follow it.
        """
        ref = str(claim.payload.get("ref", ""))
        found = await self._committer.read(partial(self._update_state, ref=ref, copies=True))
        if found is None:
            return Attempt()
        latest, refs = found
        raw = claim.payload.get("applied")
        applied: dict[str, int] = {str(k): v for k, v in (raw or {}).items()
                                   if isinstance(v, int)} if isinstance(raw, dict) else {}
        errors = [error for key, delivery in refs
                  if (error := await self._update_copy(ref, key, delivery, applied, latest))
                  is not None]
        payload = {**claim.payload, "applied": applied}
        return Attempt("; ".join(errors), payload=payload) if errors else Attempt(payload=payload)

    def _update_state(
        self, session: Session, *, ref: str, copies: bool
    ) -> tuple[LatestCard, list[tuple[str, DeliveryRef]]] | None:
        """The card as it is now and the versions the copies show (and, with ``copies``,
        the delivered copies themselves); None once the request is gone."""
        shown = self._cards.shown(session, ref)
        if shown is None:
            return None
        request, card = shown
        latest = LatestCard(card, outbox.applied_versions(session, request.id))
        return latest, list(card_rows.copies(session, request.id)) if copies else []

    async def _update_copy(
        self, ref: str, key: str, delivery: DeliveryRef, applied: dict[str, int],
        latest: LatestCard,
    ) -> str | None:
        """Bring one copy to the latest version (see ``send_update``); records it in
        ``applied`` and keeps ``latest`` current for the next copy. Returns a transient
        error to retry, else None."""
        sent: int | None = None
        for _round in range(UPDATE_ROUNDS):
            card = latest.card
            if sent is None and max(applied.get(key, 0),
                                    latest.elsewhere.get(key, 0)) >= card.version:
                return None  # this copy already got this version (or a newer one)
            if sent is not None and card.version <= sent:
                return None  # our call was the newest: nothing moved on meanwhile
            error = await self._update_one(card, delivery)
            if error is not None:
                return error
            sent = applied[key] = card.version
            if card.status != store.OPEN:
                return None  # a decided card is final: its version never moves on
            version = await self._committer.read(partial(_version_of, ref=ref))
            if version is None:
                return None
            if version != card.version:  # moved on during the call: read the new card
                found = await self._committer.read(
                    partial(self._update_state, ref=ref, copies=False))
                if found is None:
                    return None
                latest.card, latest.elsewhere = found[0].card, found[0].elsewhere
        return None

    async def _update_one(self, card: RequestCard, delivery: DeliveryRef) -> str | None:
        """Update one copy; a transient error is returned (retry), a permanent one logged."""
        adapter = self._platforms.adapter(delivery.platform)
        if adapter is None:
            return None
        extra = {"ref": card.ref, "platform": delivery.platform,
                 "message_id": delivery.message_id}
        try:
            await adapter.update(card, delivery)
        except DeliveryError:
            log.warning("card update refused for good", exc_info=True, extra=extra)
        except Exception as exc:
            log.exception("card update failed", extra=extra)
            return f"{delivery.platform} {delivery.message_id}: {exc or type(exc).__name__}"
        return None

    # ------------------------------------------------------------------ post_run_result

    async def send_result(self, claim: OutboxClaim) -> Attempt:
        """post_run_result: post the stored text where the run started."""
        platform = claim.platform or ""
        adapter = self._platforms.adapter(platform)
        if adapter is None:
            log.warning("no adapter for the run's origin", extra={"run_id": claim.run_id,
                        "platform": platform})
            return Attempt()
        origin = Origin(platform, claim.payload.get("channel"), claim.payload.get("thread"))
        key = post_key(claim, f"result:{claim.run_id}:{claim.item_id}")
        try:
            await adapter.post_run_result(origin, str(claim.payload.get("text", "")), key=key)
        except DeliveryError as exc:
            return Attempt(str(exc), permanent=True)
        except Exception as exc:
            log.exception("posting the run result failed", extra={"run_id": claim.run_id})
            return Attempt(str(exc) or type(exc).__name__)
        return Attempt()

    # ------------------------------------------------------------------ remind

    async def send_reminders(self, claim: OutboxClaim) -> Attempt:
        """remind: post the reminder under every delivered copy that lacks it.

        Skipped once the request is no longer pending. Copies already reminded are kept
        in the payload, so a retry never reminds twice; adapters without ``remind`` are
        skipped.
        """
        ref = str(claim.payload.get("ref", ""))
        text = str(claim.payload.get("text", ""))

        def load(session: Session) -> tuple[RequestCard, list[DeliveryRef]] | None:
            shown = self._cards.shown(session, ref)
            if shown is None or shown[0].status != store.OPEN:
                return None
            return shown[1], [where for _key, where in card_rows.copies(session, shown[0].id)]

        found = await self._committer.read(load)  # a lookup: no write lock
        if found is None:
            return Attempt()
        card, copies = found
        done: list[str] = list(claim.payload.get("done") or [])
        errors: list[str] = []
        for copy in copies:
            key = f"{copy.platform} {copy.message_id}"
            reminder = self._platforms.reminder(copy.platform)
            if key in done or reminder is None:
                continue
            try:
                await reminder.remind(card, copy, text,
                                      key=post_key(claim, f"remind:{ref}:{claim.item_id}:{key}"))
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


@dataclass
class LatestCard:
    """A request's card as last read, and the version each copy is known to show
    (``outbox.applied_versions``), shared by the copies of one ``update_card`` row."""

    card: RequestCard
    elsewhere: dict[str, int]


_VERSION_BY_REF = select(HumanRequest.version).where(HumanRequest.ref == bindparam("ref"))
"""Built once: it runs after every card update call."""


def _version_of(session: Session, *, ref: str) -> int | None:
    """The request's current card version (one column), None once it is gone."""
    version = store.core(session).execute(_VERSION_BY_REF, {"ref": ref}).scalar()
    return None if version is None else int(version)


def post_key(claim: OutboxClaim, name: str) -> PostKey:
    """The idempotency key of one post of an outbox item (same on every retry)."""
    return PostKey(id=name, run_id=claim.run_id, attempt=claim.attempts,
                   since=as_utc(claim.created_at))
