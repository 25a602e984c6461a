"""Verify the ``request.resolved`` webhooks askhuman signs (Standard Webhooks)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from askhuman_client.models import HumanRequest


class WebhookEvent(BaseModel):
    """``{"type": "request.resolved", "timestamp", "data": <the request>}``."""

    model_config = ConfigDict(extra="allow")

    type: str
    timestamp: str | None = None
    data: HumanRequest


def verify_webhook(secret: str, body: bytes | str, headers: Mapping[str, str]) -> WebhookEvent:
    """The event if ``webhook-signature`` matches ``secret`` (``whsec_…``) and the
    timestamp is fresh; raises ``WebhookVerificationError`` otherwise. Pass the raw body
    exactly as received. Deliveries repeat with the same ``webhook-id``: drop repeats."""
    lowered = {name.lower(): value for name, value in headers.items()}
    raw = body.decode() if isinstance(body, bytes) else body
    payload: Any = Webhook(secret).verify(raw, lowered)
    return WebhookEvent.model_validate(payload)


__all__ = ["WebhookEvent", "WebhookVerificationError", "verify_webhook"]
