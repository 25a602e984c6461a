"""Messages to the bot (``im.message.receive_v1``): deduplicated, then handed to the
command or file listener.

The long connection's SDK (and the HTTP endpoint's dispatcher) call ``on_message``
synchronously; it queues the message for the main loop and returns once a run start
the message asks for is stored (the HTTP endpoint waits for that before its 200), so an
acknowledged start is never lost.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
from functools import partial
from typing import Any

from bot.engine.ports import Identity
from bot.platforms.feishu.delegate import mention_ids
from bot.platforms.feishu.handlers.audit import Auditor
from bot.platforms.feishu.handlers.commands import CommandListener, Gate
from bot.platforms.feishu.handlers.dedupe import SharedDedupe
from bot.platforms.feishu.handlers.files import FILE_MESSAGE_TYPES, FileListener
from bot.platforms.feishu.handlers.loop import MainLoop
from bot.platforms.feishu.message import Incoming
from bot.platforms.feishu.replay import ReplayGuard
from bot.platforms.feishu.reply_context import current_reply, shared_verdict

log = logging.getLogger("askhuman.feishu.events")

PLATFORM = "feishu"
STORE_BUDGET = 2.5
"""Seconds the long connection's ack may wait for a run start to be stored."""


def _open(gate: concurrent.futures.Future[None]) -> None:
    """Let the transport ack the message (idempotent, from any thread)."""
    if not gate.done():
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            gate.set_result(None)


class MessageListener:
    """Turns a message event into an ``Incoming`` (once) and routes it."""

    def __init__(
        self,
        guard: ReplayGuard,
        loop: MainLoop,
        dedupe: SharedDedupe,
        auditor: Auditor,
        commands: CommandListener,
        files: FileListener,
    ) -> None:
        self._guard = guard
        self._loop = loop
        self._dedupe = dedupe
        self._auditor = auditor
        self._commands = commands
        self._files = files

    def on_message(self, data: Any) -> None:
        """Queue the message for the main loop and return at once (Feishu wants an ack)."""
        try:
            self._message(data)
        except Exception:
            log.exception("feishu message event failed")

    def _message(self, data: Any) -> None:
        event_id = getattr(data.header, "event_id", None) or ""
        event = data.event
        message = getattr(event, "message", None)
        sender = getattr(event, "sender", None)
        if message is None or sender is None:
            return
        if getattr(sender, "sender_type", "user") != "user":
            return  # other bots, and our own messages
        open_id = getattr(getattr(sender, "sender_id", None), "open_id", None)
        message_id = getattr(message, "message_id", None)
        if not open_id or not message_id:
            return
        if not self._guard.first_event(event_id) or not self._guard.first_event(
            f"message:{message_id}"
        ):
            log.info("duplicate feishu message ignored", extra={"message_id": message_id})
            self._auditor.audit_later(
                None, Identity(PLATFORM, open_id), "Duplicate Feishu message "
                "event (already handled).", check="duplicate_message",
                event_id=event_id[:200], message_id=message_id[:200])
            return
        incoming = Incoming(
            message_id=message_id,
            chat_id=getattr(message, "chat_id", None) or "",
            chat_type=getattr(message, "chat_type", None) or "",
            message_type=getattr(message, "message_type", None) or "",
            content=getattr(message, "content", None) or "",
            parent_id=getattr(message, "parent_id", None),
            root_id=getattr(message, "root_id", None),
            mentions=[
                (m.key or "", m.name or "")
                for m in getattr(message, "mentions", None) or []
                if getattr(m, "key", None)
            ],
            sender=Identity(PLATFORM, open_id),
            mention_ids=mention_ids(message),
        )
        gate: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._loop.spawn(self.handle(incoming, event_id, shared_verdict(event_id),
                                     partial(_open, gate)))
        self._ack_when_stored(gate)

    def _ack_when_stored(self, gate: concurrent.futures.Future[None]) -> None:
        """Hold the transport's ack until a run start the message asks for is stored
        (or it asks for none): the HTTP endpoint waits for the gates its context
        collects; the long connection's SDK thread waits here (bounded)."""
        context = current_reply.get()
        if context is not None:
            context.before_reply.append(gate)
            return
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop.require():
            return  # never block the loop that stores it
        try:
            gate.result(timeout=STORE_BUDGET)
        except concurrent.futures.TimeoutError:
            log.warning("feishu message acked before its run start was stored",
                        extra={"budget_seconds": STORE_BUDGET})

    async def handle(
        self, msg: Incoming, event_id: str = "", shared_new: bool | None = None,
        stored: Gate = lambda: None,
    ) -> None:
        """``shared_new``: the endpoint's verdict on ``event:{event_id}`` (None: record
        it here, in the same transaction as the message id). ``stored()`` is called once
        the message may be acked (its run start is stored, or it starts none)."""
        try:
            await self._handle(msg, event_id, shared_new, stored)
        finally:
            stored()

    async def _handle(self, msg: Incoming, event_id: str, shared_new: bool | None,
                      stored: Gate) -> None:
        keys = [f"message:{msg.message_id}"]
        if shared_new is None and event_id:
            keys.insert(0, f"event:{event_id}")
        fresh = shared_new is not False and all(await self._dedupe.first_seen_chain(keys))
        if not fresh:
            # A re-push that another replica (or an earlier run of this one) handled.
            log.info("duplicate feishu message ignored (shared)",
                     extra={"message_id": msg.message_id})
            stored()
            await self._auditor.audit(None, msg.sender, "Duplicate Feishu message event "
                                      "(already handled).", check="duplicate_message",
                                      event_id=event_id[:200],
                                      message_id=msg.message_id[:200])
            return
        try:
            if msg.message_type in FILE_MESSAGE_TYPES:
                stored()
                await self._files.attach(msg)
            elif msg.message_type == "text":
                await self._commands.command(msg, stored)
        except Exception:
            log.exception("handling a feishu message failed", extra={"message_id": msg.message_id})
