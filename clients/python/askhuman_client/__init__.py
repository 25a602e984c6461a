"""askhuman-client: ask people in Slack or Feishu from any Python program.

``Client`` (sync) and ``AsyncClient`` speak ``/api/v1`` of ``askhuman serve``;
``verify_webhook`` checks the signed ``request.resolved`` webhooks it sends.
"""

from askhuman_client.aio import AsyncClient
from askhuman_client.client import Client
from askhuman_client.errors import (
    AlreadyResolved,
    AskHumanError,
    Forbidden,
    IdempotencyConflict,
    NotFound,
    RateLimited,
    ServerError,
    Unauthorized,
    ValidationFailed,
)
from askhuman_client.models import AskHumanResult, Decider, Decision, HumanRequest, RequestPage
from askhuman_client.webhooks import WebhookEvent, WebhookVerificationError, verify_webhook
from askhuman_client.wire import Retry

__all__ = [
    "AlreadyResolved", "AskHumanError", "AskHumanResult", "AsyncClient", "Client", "Decider",
    "Decision", "Forbidden", "HumanRequest", "IdempotencyConflict", "NotFound", "RateLimited",
    "RequestPage", "Retry", "ServerError", "Unauthorized", "ValidationFailed", "WebhookEvent",
    "WebhookVerificationError", "verify_webhook",
]
