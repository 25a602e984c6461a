"""Signed webhooks (Standard Webhooks) to the caller's ``callback_url``.

The body is the request as ``GET /api/v1/requests/{ref}`` shows it, wrapped in the
Standard Webhooks envelope ``{type, timestamp, data}``; ``data.result`` is the
``AskHumanToolResult``. Headers: ``webhook-id`` (``msg_<ref>``, the same on every
retry, so receivers can drop repeats), ``webhook-timestamp`` (this attempt) and
``webhook-signature`` (``v1,<base64 HMAC-SHA256>``, made with the ``standardwebhooks``
package; during a secret rotation's grace period it carries both signatures), and,
when the request has a trace context, ``traceparent`` (``tracestate``): the span of
this attempt (``bot.engine.tracing``), outside the signature, which covers
``id.timestamp.body`` only, so Standard Webhooks verification is unchanged.
The URL is re-checked and the host re-resolved before each attempt; the connection
goes to the address that passed the check, with the original Host (and TLS SNI).
Anything but 2xx is retried by the engine's outbox; 410 Gone stops the retries.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from standardwebhooks import Webhook

from bot.api.callbacks import CallbackPolicy, CallbackRefused
from bot.api.keys import SecretBox
from bot.api.views import request_json
from bot.engine.external import ExternalView
from bot.engine.ports import DeliveryError
from bot.engine.webhooks import WebhookDelivery

EVENT_TYPE = "request.resolved"
USER_AGENT = "askhuman-webhooks/1"


def webhook_body(view: ExternalView) -> dict[str, Any]:
    """The envelope (stable for one request, so every retry sends the same bytes)."""
    stamp = view.decided_at or view.created_at
    return {"type": EVENT_TYPE, "timestamp": stamp.isoformat().replace("+00:00", "Z"),
            "data": request_json(view)}


def encode(body: dict[str, Any]) -> str:
    return json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def sign(secrets: list[str], webhook_id: str, timestamp: dt.datetime, payload: str) -> str:
    """``webhook-signature``: one ``v1,…`` per secret, space-separated."""
    return " ".join(Webhook(secret).sign(webhook_id, timestamp, payload) for secret in secrets)


class WebhookFailed(Exception):
    """The receiver did not answer 2xx (retried)."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class WebhookGone(DeliveryError):
    """The receiver answered 410 Gone: no more retries."""

    status_code = 410


class HttpWebhookSender:
    """``WebhookSender`` over httpx, with the allow-list checked before every attempt."""

    def __init__(self, policy: CallbackPolicy, box: SecretBox | None,
                 timeout: float = 10.0) -> None:
        self.policy = policy
        self.box = box
        self.timeout = timeout

    async def send(self, delivery: WebhookDelivery) -> int:
        if self.box is None:
            raise WebhookFailed("ASKHUMAN_SECRET_KEY is not set on this replica")
        try:
            target = await self.policy.resolve(delivery.url)
        except CallbackRefused as exc:
            raise DeliveryError(str(exc)) from None
        secrets = [self.box.open(s, delivery.client_name) for s in delivery.secrets_enc]
        payload = encode(webhook_body(delivery.view))
        now = dt.datetime.now(dt.UTC)
        headers = {
            "content-type": "application/json",
            "user-agent": USER_AGENT,
            "host": target.host_header,
            "webhook-id": delivery.webhook_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": sign(secrets, delivery.webhook_id, now, payload),
            **delivery.trace_headers,  # not signed: Standard Webhooks signs id.timestamp.body
        }
        extensions = {"sni_hostname": target.host} if target.url.scheme == "https" else {}
        import httpx  # with the first webhook sent: about 9 MB a server without them skips

        async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=False,
                                     trust_env=False) as http:
            try:
                response = await http.post(target.pinned_url(), content=payload.encode(),
                                           headers=headers, extensions=extensions)
            except httpx.HTTPError as exc:
                raise WebhookFailed(f"{type(exc).__name__}: {exc}") from None
        if 200 <= response.status_code < 300:
            return response.status_code
        if response.status_code == 410:
            raise WebhookGone("the receiver answered 410 Gone")
        raise WebhookFailed(f"the receiver answered HTTP {response.status_code}",
                            response.status_code)
