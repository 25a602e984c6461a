"""Webhooks: the signed POST an API client gets when its request resolves.

A ``webhook`` outbox row is queued in the transaction that settled the request
(``external``); this module is that row's ``Handler``. Webhooks are retried far longer
than platform calls (``Tuning.webhook_backoff``: about 28 h over 14 attempts) and keep
one id per request (``msg_<ref>``), so receivers can drop repeats. The HTTP call and
the signature are the door's job (``bot.api.webhooks``), attached as the ``sender``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Any, Protocol
from urllib.parse import urlsplit

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.engine import tracing
from bot.engine.committer import Committer, log
from bot.engine.context import EngineContext
from bot.engine.dispatch import Handler
from bot.engine.external import ExternalView, view_of
from bot.engine.outbox import Attempt, OutboxClaim
from bot.engine.ports import DeliveryError
from storage import ApiClient, ExternalRequest, HumanRequest, Run


@dataclass(frozen=True)
class WebhookDelivery:
    """What the door needs to sign and POST one webhook (secrets still encrypted)."""

    webhook_id: str
    url: str
    view: ExternalView
    client_name: str
    secrets_enc: tuple[str, ...]
    """The current secret first; the previous one during a rotation's grace period."""
    attempt: int
    trace_context: dict[str, Any] | None = None
    """The request's stored trace context (``bot.engine.trace_context``)."""
    trace_headers: dict[str, str] = field(default_factory=dict)
    """``traceparent`` (and ``tracestate``) to send: this attempt's ``webhook.sent`` span
    with tracing on, else the stored context as it came (``tracing.carrier``)."""


class WebhookSender(Protocol):
    """The door's side of webhooks. Raise ``DeliveryError`` when retrying cannot help
    (the URL is no longer allowed, the receiver answered 410 Gone); any other error is
    retried with ``webhook_backoff``. Returns the receiver's HTTP status; an exception
    may carry it as ``status_code`` (both only end up on the span)."""

    async def send(self, delivery: WebhookDelivery) -> int | None: ...




class Webhooks:
    """Sends ``webhook`` outbox rows through the door's ``WebhookSender``."""

    def __init__(self, ctx: EngineContext, committer: Committer) -> None:
        self._ctx = ctx
        self._committer = committer
        self.sender: WebhookSender | None = None
        self.rotation_grace = dt.timedelta(hours=24)
        """How long a rotated-out secret still signs webhooks (next to the new one)."""

    def handler(self) -> Handler:
        """The ``webhook`` kind for the ``Outbox`` registry (its own retry schedule)."""
        return Handler(self.send, max_attempts=lambda: self._ctx.tuning.webhook_max_attempts,
                       delay=self.delay)

    def delay(self, claim: OutboxClaim) -> dt.timedelta:
        steps = self._ctx.tuning.webhook_backoff
        return dt.timedelta(seconds=steps[min(claim.attempts, len(steps)) - 1])

    async def send(self, claim: OutboxClaim) -> Attempt:
        sender = self.sender
        if sender is None:
            return Attempt("no webhook sender in this process; another replica retries")
        ref = str(claim.payload.get("ref", ""))
        now = self._ctx.now()
        grace = self.rotation_grace

        def load(session: Session) -> WebhookDelivery | None:
            found = session.execute(
                select(HumanRequest, Run, ExternalRequest, ApiClient)
                .join(ExternalRequest, ExternalRequest.request_id == HumanRequest.id)
                .join(Run, Run.id == HumanRequest.run_id)
                .join(ApiClient, ApiClient.id == ExternalRequest.client_id)
                .where(HumanRequest.ref == ref)).first()
            if found is None:
                return None
            request, run, ext, client = found
            if client.revoked_at is not None or not ext.callback_url:
                return None
            secrets = [client.secret_enc]
            rotated = client.secret_rotated_at
            if client.previous_secret_enc and rotated is not None and now - rotated < grace:
                secrets.append(client.previous_secret_enc)
            return WebhookDelivery(str(claim.payload.get("webhook_id") or f"msg_{ref}"),
                                   ext.callback_url, view_of(request, run, ext), client.name,
                                   tuple(secrets), claim.attempts, request.trace_context)

        delivery = await self._committer.read(load)
        if delivery is None:
            log.info("webhook dropped: request gone, no callback or client revoked",
                     extra={"ref": ref})
            return Attempt()
        span = tracing.start("askhuman.webhook.sent", delivery.trace_context, {
            "askhuman.request.ref": ref, "askhuman.webhook.id": delivery.webhook_id,
            "askhuman.webhook.attempt": claim.attempts, "http.request.method": "POST",
            "server.address": urlsplit(delivery.url).hostname or ""}, client=True)
        delivery = replace(delivery, trace_headers=tracing.carrier(span, delivery.trace_context))
        try:
            status = await sender.send(delivery)
        except DeliveryError as exc:
            tracing.finish(span, exc, attributes={"http.response.status_code": _status_of(exc)})
            return Attempt(str(exc), permanent=True)
        except Exception as exc:
            tracing.finish(span, exc, attributes={"http.response.status_code": _status_of(exc)})
            log.warning("webhook attempt failed", extra={"ref": ref, "attempt": claim.attempts,
                                                         "error": str(exc)[:300]})
            return Attempt(str(exc)[:2000] or type(exc).__name__)
        tracing.finish(span, attributes={"http.response.status_code": status})
        log.info("webhook delivered", extra={"ref": ref, "attempt": claim.attempts})
        return Attempt()


def _status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None
