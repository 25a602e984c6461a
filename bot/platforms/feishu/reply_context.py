"""What the HTTP endpoint tells the handlers about the request being answered.

The endpoint (``http.py``) sets ``current_reply`` for each callback; the handlers read
it (on the main loop, or on an SDK thread the endpoint called into). On the long
connection there is none. It lives apart from both so neither imports the other.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import time
from dataclasses import dataclass, field


@dataclass
class ReplyContext:
    """Per HTTP request: refs whose card patches must wait until the reply is sent, and
    the shared dedupe verdict of the event id the endpoint recorded with the nonce."""

    held_refs: list[str] = field(default_factory=list)
    shared_events: dict[str, bool] = field(default_factory=dict)
    deferred_seen: tuple[str, ...] = ()
    """A click's shared dedupe keys (nonce, event id) the endpoint left to be recorded
    in the click's own transaction (``engine.record_click(seen=…)``)."""
    replayed: bool = False
    """Set when that write found the nonce recorded before: the endpoint answers 401."""
    before_reply: list[concurrent.futures.Future[None]] = field(default_factory=list)
    """Done once what a message asked for may be acknowledged (its run start is
    stored): the endpoint waits for these, within the reply budget, before its 200."""
    started: float = field(default_factory=time.monotonic)
    """When the request arrived (``time.monotonic``): the reply budget counts from here."""


current_reply: contextvars.ContextVar[ReplyContext | None] = contextvars.ContextVar(
    "askhuman_feishu_reply", default=None
)


def shared_verdict(event_id: str) -> bool | None:
    """From an SDK thread: whether the HTTP endpoint already recorded ``event_id``
    in the shared table with the request's nonce (None: not recorded there, e.g. on
    the long connection; the handler records it itself)."""
    ctx = current_reply.get()
    return ctx.shared_events.get(event_id) if ctx is not None and event_id else None
