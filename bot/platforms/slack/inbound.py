"""Cheap refusals for ``/slack/events``, before Bolt parses anything.

Bolt's Starlette adapter decodes and parses the body (JSON, form, ``payload=``) into
a ``BoltRequest`` *before* its own signature middleware runs, and a body it cannot
parse ends as a 500 with a traceback. Here the raw bytes are checked first, with
slack-sdk's ``SignatureVerifier`` (HMAC-SHA256, 5-minute window): unsigned, forged or
stale requests get 401 and one log line, malformed signed ones 400. Only then is the
``BoltRequest`` built, and a body that does not parse into a Slack payload is a 400
too. The body size is capped before this, by ``bot.web.BodyLimit``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slack_bolt.async_app import AsyncBoltRequest
from slack_bolt.request import payload_utils
from slack_sdk.signature import SignatureVerifier
from starlette.requests import Request

log = logging.getLogger("askhuman.slack.http")

TIMESTAMP = "x-slack-request-timestamp"
SIGNATURE = "x-slack-signature"
WINDOW_SECONDS = 300
"""slack-sdk's window: a timestamp more than 5 minutes off is refused."""
_PAYLOAD_PARTS = (
    payload_utils.to_options, payload_utils.to_shortcut, payload_utils.to_action,
    payload_utils.to_view, payload_utils.to_command, payload_utils.to_event,
    payload_utils.to_message, payload_utils.to_step,
)
"""What Bolt extracts for every middleware and listener call; each must be an object."""
_OBJECTS = ("event", "team", "user", "channel", "container", "view", "message", "state",
            "enterprise")
_LISTS_OF_OBJECTS = ("actions", "authorizations")
"""Top-level keys Slack always sends as objects / lists of objects, when it sends them."""
_STRINGS: dict[str, tuple[tuple[str, ...], ...]] = {
    "command": (("command",), ("user_id",), ("channel_id",)),
    "block_actions": (("user", "id"),),
    "view_submission": (("user", "id"), ("view", "callback_id")),
    "event_callback": (("event_id",), ("event", "type")),
}
"""Per kind of payload, the fields Slack always sends as strings (Bolt's matchers and
our listeners rely on them)."""


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: the HTTP status and a short reason for the reply."""

    status: int
    reason: str


def check_signature(
    verifier: SignatureVerifier, body: bytes, headers: Mapping[str, str]
) -> Refusal | None:
    """None if ``body`` carries Slack's valid, fresh signature; else why not.

    Order: headers present → timestamp a number → within the window → UTF-8 → HMAC.
    Everything before the HMAC is a comparison on a header, so junk costs nothing.
    """
    timestamp, signature = headers.get(TIMESTAMP), headers.get(SIGNATURE)
    if not timestamp or not signature:
        return Refusal(401, "missing Slack signature headers")
    try:
        sent_at = int(timestamp)
    except ValueError:
        return Refusal(400, "X-Slack-Request-Timestamp is not a number")
    if abs(time.time() - sent_at) > WINDOW_SECONDS:
        return Refusal(401, "stale or future timestamp")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return Refusal(400, "body is not UTF-8")
    if not verifier.is_valid(body=text, timestamp=timestamp, signature=signature):
        return Refusal(401, "bad signature")
    return None


def bolt_request(request: Request, body: bytes) -> AsyncBoltRequest | Refusal:
    """The ``BoltRequest`` for a verified body, or a 400 if it is no Slack payload.

    Bolt parses JSON, forms and the ``payload=`` field, reads team and user ids from
    the result, and hands every middleware the event / action / view / ... parts. Any
    failure there (invalid JSON, nesting deep enough for a ``RecursionError``, a JSON
    array, a part of the wrong type) means the body is junk; caught here it is a 400,
    inside Bolt it would be a 500 with a traceback.
    """
    try:
        parsed = AsyncBoltRequest(
            body=body.decode("utf-8"),
            query=request.query_params,  # type: ignore[arg-type]
            headers=request.headers,  # type: ignore[arg-type]
        )
        parts = [extract(parsed.body) for extract in _PAYLOAD_PARTS]
    except Exception as exc:  # signed junk is still junk: refuse, don't crash
        return Refusal(400, f"malformed Slack payload ({type(exc).__name__})")
    if not all(part is None or isinstance(part, dict) for part in parts):
        return Refusal(400, "malformed Slack payload (a part is not an object)")
    wrong = wrong_shape(parsed.body)
    if wrong is not None:
        return Refusal(400, f"malformed Slack payload ({wrong} is missing or of the wrong type)")
    return parsed


def wrong_shape(body: dict[str, Any]) -> str | None:
    """The first field whose type or absence Slack never sends (Bolt would crash on it)."""
    for key in _OBJECTS:
        if not isinstance(body.get(key), dict | None):
            return key
    for key in _LISTS_OF_OBJECTS:
        items = body.get(key)
        if items is not None and not (
            isinstance(items, list) and all(isinstance(item, dict) for item in items)
        ):
            return key
    if not all(isinstance(action.get("action_id"), str) for action in body.get("actions") or []):
        return "actions.action_id"
    kind = "command" if "command" in body else str(body.get("type"))
    for path in _STRINGS.get(kind, ()):
        value: Any = body
        for step in path:
            value = value.get(step) if isinstance(value, dict) else None
        if not isinstance(value, str):
            return ".".join(path)
    return None


def log_refusal(refusal: Refusal, request: Request) -> None:
    """One short line per refused request; never the body, never a traceback."""
    log.warning(
        "slack request refused",
        extra={"platform": "slack", "status": refusal.status, "reason": refusal.reason,
               "path": request.url.path},
    )
