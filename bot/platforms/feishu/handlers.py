"""Inbound Feishu events, shared by the HTTP callback endpoint and the long connection.

A card click is answered first and decided afterwards. The toast is the click's
acknowledgement and Feishu never resends an acknowledged click, so the click is stored
in the engine's click inbox before any toast other than an error: once the signature,
decryption, dedupe and that durable write have succeeded, the toast says "received"
(``renderers.i18n``, the card's locale). Then, in the background, the engine decides
from the stored click (``decide_click``: message → ref check, authorization, values,
compare-and-set), the outbox patches the card for everyone, and a clicker whose answer
was not taken (refused, late, unauthorized, a vote short of the quorum) is told
privately, in their chat with the bot. If the click could not even be stored, the
toast is an error asking to click again. A crash after the toast loses nothing: the
engine's worker decides stored clicks and tells the clicker.

The HTTP endpoint calls ``answer_click`` on the main loop (no thread, no second
decryption). The long connection's SDK calls ``on_card_action`` and ``on_message``
synchronously on its own thread; they hand work to the main loop with
``run_coroutine_threadsafe``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import re
import threading
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

import lark_oapi as lark
from lark_oapi.event.callback.model.p2_card_action_trigger import (
    P2CardActionTrigger,
    P2CardActionTriggerResponse,
)
from pydantic import JsonValue

from bot.engine.clicks import DEFERRED, NOT_RECORDED
from bot.engine.health import DATABASE_DOWN, database_unreachable
from bot.engine.inbox import AlreadySeen, Click, ClickTooLarge, Recorded
from bot.engine.ports import Identity, Origin
from bot.engine.results import EngineError
from bot.platforms.feishu.adapter import FeishuAdapter, plain_text
from bot.platforms.feishu.client import FeishuApi, FeishuApiError, dumps
from bot.platforms.feishu.delegate import delegate_command, delegate_rest, mention_ids
from bot.platforms.feishu.engine_api import EngineApi
from bot.platforms.feishu.i18n import toast_i18n
from bot.platforms.feishu.message import Incoming, file_reference, message_text
from bot.platforms.feishu.names import NEUTRAL, OPEN_ID_IN_TEXT, NameCache
from bot.platforms.feishu.pending import PENDING_PER_PAGE, pending_command, pending_reply
from bot.platforms.feishu.replay import ReplayGuard, parse_epoch
from bot.platforms.feishu.reply_context import current_reply
from renderers.card import WITHDRAW_TOKEN
from renderers.feishu import parse_callback_value
from renderers.i18n import CATALOG, say
from renderers.markdown import message_text as inert_text

log = logging.getLogger("askhuman.feishu.events")

PLATFORM = "feishu"
_COMMAND = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9_.\-]{0,63})\s*[:：]\s*(.+)$", re.DOTALL)
HELP_TEXT = CATALOG["en"]["feishu.help"]
FILE_MESSAGE_TYPES = ("file", "image", "media", "audio")
DUPLICATE = "duplicate"
"""``_decide``'s verdict for a callback already handled (answered with ``{}``)."""
ANSWERS_FIRST_QUIET = 0.02
"""Decisions start once no click has arrived for this long (seconds)..."""
ANSWERS_FIRST_PATIENCE = 1.0
"""...or after this long at the latest."""
DECIDING = 4
"""Stored clicks decided at a time by one process (the rest wait their turn)."""


WORKING = CATALOG["en"]["click.received"]
RECEIVED_TEXTS = frozenset(CATALOG[locale]["click.received"] for locale in CATALOG)
"""The toast of a stored click (English)."""


def received_text(click: Click) -> str:
    """The toast for a stored click, in its card's locale."""
    return say(click.reply_to.get("locale"), "click.received")


@dataclass(frozen=True)
class Admitted:
    """A click that passed the checks needing no database, ready to be stored."""

    click: Click
    event_id: str
    shared_new: bool | None
    """The endpoint's verdict on ``event:{event_id}`` (None: record it when storing)."""


class Handoff:
    """Who got there first, the SDK thread that must reply or the coroutine storing the
    click: a click stored after its reply gave up (and asked to click again) is dropped,
    and a "received" toast is only sent for a click that is stored."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = "waiting"

    def stored(self) -> bool:
        """From the coroutine: the click is stored; False if the reply already gave up."""
        with self._lock:
            if self._state == "gave_up":
                return False
            self._state = "stored"
            return True

    def give_up(self) -> bool:
        """From the SDK thread, out of time: True if the click is stored by now."""
        with self._lock:
            if self._state == "stored":
                return True
            self._state = "gave_up"
            return False


def toast(kind: str, content: str) -> P2CardActionTriggerResponse:
    """A toast-only callback reply (never a 2.0 card: Feishu may reject it, 200673)."""
    shown = inert_text(content, 500) or "…"
    if shown in RECEIVED_TEXTS:  # the route's language, and both for the client to pick
        both = {"i18n": {"zh_cn": CATALOG["zh-CN"]["click.received"], "en_us": WORKING}}
        return P2CardActionTriggerResponse({"toast": {"type": kind, "content": shown, **both}})
    return P2CardActionTriggerResponse({"toast": {"type": kind, "content": shown,
                                                  **toast_i18n(shown)}})


_TOAST_KIND = {
    "accepted": "success",
    "recorded": "success",
    "rejected": "error",
    "already_decided": "error",
    "not_found": "error",
}


class FeishuEventHandlers:
    """Translate card clicks and messages into engine calls."""

    def __init__(
        self,
        engine: EngineApi,
        adapter: FeishuAdapter,
        api: FeishuApi,
        guard: ReplayGuard,
        *,
        reply_budget: float = 2.5,
        ws_release_delay: float = 0.3,
        names: NameCache | None = None,
    ) -> None:
        self._engine = engine
        self._names = names
        self._adapter = adapter
        self._api = api
        self._guard = guard
        self._budget = reply_budget
        self._ws_release_delay = ws_release_delay
        self._loop: asyncio.AbstractEventLoop | None = None
        self._background: set[concurrent.futures.Future[Any]] = set()
        self._tasks: set[asyncio.Future[Any]] = set()
        self._answering = 0
        self._last_arrival = 0.0
        self._deciding = asyncio.Semaphore(DECIDING)
        self._telling = asyncio.Semaphore(DECIDING)

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The application's loop: engine calls and adapter holds run there."""
        self._loop = loop

    def dispatcher(self, encrypt_key: str, verification_token: str) -> Any:
        """An SDK dispatcher wired to these handlers (keys unused on the WS path)."""
        return (
            lark.EventDispatcherHandler.builder(encrypt_key, verification_token)
            .register_p2_card_action_trigger(self.on_card_action)
            .register_p2_im_message_receive_v1(self.on_message)
            .build()
        )

    async def drain(self, timeout: float = 10.0) -> None:
        """Wait (on the main loop) until scheduled message handling and click decisions
        have finished."""
        pending: list[asyncio.Future[Any]] = [
            asyncio.wrap_future(f) for f in set(self._background)]
        pending.extend(self._tasks)
        if pending:
            await asyncio.wait(pending, timeout=timeout)

    # -- shared dedupe and refusal audit (main loop) ------------------------------------

    async def first_seen(self, key: str) -> bool:
        """``engine.first_seen`` for Feishu: True unless another replica (or this one)
        already recorded ``key``. Fails open: on a database error the event is handled
        (this process still remembers ids in memory; decisions are compare-and-set)."""
        try:
            return await self._engine.first_seen(PLATFORM, key)
        except Exception:
            log.exception("shared feishu dedupe failed; handling the event", extra={"key": key})
            return True

    async def first_seen_chain(self, keys: Sequence[str]) -> list[bool]:
        """``engine.first_seen_chain`` for Feishu (one transaction for several keys,
        stopping at the first repeat); fails open like ``first_seen``."""
        try:
            return await self._engine.first_seen_chain(PLATFORM, keys)
        except Exception:
            log.exception("shared feishu dedupe failed; handling the event",
                          extra={"key": ", ".join(keys)[:200]})
            return [True] * len(keys)

    @staticmethod
    def _shared_verdict(event_id: str) -> bool | None:
        """From an SDK thread: whether the HTTP endpoint already recorded ``event_id``
        in the shared table with the request's nonce (None: not recorded there, e.g. on
        the long connection; the handler records it itself)."""
        ctx = current_reply.get()
        return ctx.shared_events.get(event_id) if ctx is not None and event_id else None

    async def audit(
        self, ref: str | None, who: Identity | None, reason: str, **details: JsonValue
    ) -> None:
        """Audit a refusal decided here (never raises). Only for authenticated requests:
        signature-checked HTTP callbacks, or the app's own long connection."""
        try:
            await self._engine.audit_refusal(ref, who, reason, {"platform": PLATFORM, **details})
        except Exception:
            log.exception("could not audit a feishu refusal", extra={"ref": (ref or "")[:64]})

    def _audit_later(
        self, ref: str | None, who: Identity | None, reason: str, **details: JsonValue
    ) -> None:
        """From an SDK thread: audit on the main loop without delaying the reply."""
        self._spawn(self.audit(ref, who, reason, **details))

    # -- card.action.trigger ------------------------------------------------------------

    def on_card_action(self, data: P2CardActionTrigger) -> P2CardActionTriggerResponse:
        """The long connection's click (on the SDK's thread): answer within the budget;
        never raises (the SDK would 500)."""
        try:
            return self._card_action(data)
        except Exception:
            log.exception("feishu card callback failed")
            return toast("error", "Something went wrong; please try again.")

    async def answer_click(self, data: P2CardActionTrigger) -> P2CardActionTriggerResponse:
        """An HTTP callback's click, on the main loop (no thread hop): the endpoint has
        checked the signature, decrypted once and recorded nonce and event id. Answers
        as soon as the click is stored; never raises."""
        try:
            admitted = self._admit_click(data)
            if not isinstance(admitted, Admitted):
                return admitted
            ref = admitted.click.ref
            self._adapter.hold(ref)  # before any await: patches wait for this reply
            self._schedule_release(self._require_loop(), ref)
            ctx = current_reply.get()
            deadline = (ctx.started if ctx is not None else time.monotonic()) + self._budget
            kind, text = await self._store(admitted, deadline, None)
            return self._answer(admitted, kind, text)
        except Exception:
            log.exception("feishu card callback failed")
            return toast("error", "Something went wrong; please try again.")

    def _card_action(self, data: P2CardActionTrigger) -> P2CardActionTriggerResponse:
        admitted = self._admit_click(data)
        if not isinstance(admitted, Admitted):
            return admitted
        loop = self._require_loop()
        ref = admitted.click.ref
        deadline = time.monotonic() + self._budget
        handoff = Handoff()
        future = asyncio.run_coroutine_threadsafe(
            self._held_store(admitted, deadline, handoff), loop)
        try:
            kind, text = future.result(timeout=max(deadline - time.monotonic(), 0.0))
        except concurrent.futures.TimeoutError:
            if not handoff.give_up():
                log.warning("feishu click not stored within the reply budget",
                            extra={"ref": ref})
                return toast("error", NOT_RECORDED)
            kind, text = "info", received_text(admitted.click)  # stored; decided later
        finally:
            self._schedule_release(loop, ref)
        return self._answer(admitted, kind, text)

    def _admit_click(
        self, data: P2CardActionTrigger
    ) -> P2CardActionTriggerResponse | Admitted:
        """Checks that need no database (this process's dedupe, replay window, shape):
        a refusal toast, or the click to store. The rest (card, message, authorization,
        values) is checked when deciding, from the stored click."""
        header, event = data.header, data.event
        event_id = getattr(header, "event_id", None) or ""
        operator = getattr(getattr(event, "operator", None), "open_id", None)
        who = Identity(PLATFORM, operator) if operator else None
        action = getattr(event, "action", None)
        parsed = parse_callback_value(getattr(action, "value", None))
        claimed_ref = parsed[0] if parsed else None
        message_id = getattr(getattr(event, "context", None), "open_message_id", None)
        if not self._guard.first_event(event_id):
            log.info("duplicate feishu callback ignored", extra={"event_id": event_id})
            self._audit_later(claimed_ref, who, "Duplicate Feishu callback (already handled).",
                              check="duplicate_event", event_id=event_id[:200])
            return P2CardActionTriggerResponse({})
        created = parse_epoch(getattr(header, "create_time", None))
        if created is None or not self._guard.fresh(created):
            log.warning("stale feishu callback refused", extra={"event_id": event_id})
            self._audit_later(claimed_ref, who, "Feishu callback outside the replay window.",
                              check="stale_event", event_id=event_id[:200],
                              create_time=str(getattr(header, "create_time", None))[:32])
            return toast("error", "This click is too old; please try again.")
        if who is None or event is None or parsed is None:
            log.warning("malformed feishu callback refused", extra={"event_id": event_id})
            self._audit_later(claimed_ref, who, "Malformed Feishu callback (no operator or "
                              "no valid button value).", check="malformed_callback",
                              event_id=event_id[:200], message_id=str(message_id or "")[:200])
            return toast("error", "This button is not valid.")
        ref, action_id = parsed
        form_value = getattr(action, "form_value", None) or {}
        values = {k: v for k, v in form_value.items() if isinstance(k, str)}
        # Read with the card when deciding (``FeishuAdapter.read_click``); the message
        # is checked against the ref then too (``clicks_name_their_message``).
        reply_to = {"locale": self._adapter.locale_of(ref)}
        if message_id:
            reply_to["message"] = str(message_id)
        kind = "withdraw" if action_id == WITHDRAW_TOKEN else "respond"
        click = Click(PLATFORM, ref, who, action_id, values, kind=kind, reply_to=reply_to)
        return Admitted(click, event_id, self._shared_verdict(event_id))

    async def _held_store(
        self, admitted: Admitted, deadline: float, handoff: Handoff
    ) -> tuple[str, str]:
        self._adapter.hold(admitted.click.ref)  # before the first await
        return await self._store(admitted, deadline, handoff)

    async def _store(
        self, admitted: Admitted, deadline: float, handoff: Handoff | None
    ) -> tuple[str, str]:
        """Shared dedupe, then store the click (by ``deadline``, ``time.monotonic``); the
        toast to send. Deciding is queued for later (``_decide_later``). ``handoff``
        (long connection) says whether the SDK thread still waits for the answer."""
        self._answering += 1
        self._last_arrival = time.monotonic()
        try:
            click, event_id = admitted.click, admitted.event_id
            shared_new = admitted.shared_new
            ctx = current_reply.get()
            deferred = ctx.deferred_seen if ctx is not None else ()
            if deferred:
                shared_new = True  # recorded with the click below, in one transaction
            if shared_new is None and event_id:
                shared_new = await self.first_seen(f"event:{event_id}")
            if shared_new is False:
                # Another replica (or an earlier run of this one) already handled it.
                log.info("duplicate feishu callback ignored (shared)",
                         extra={"event_id": event_id})
                await self.audit(click.ref, click.responder, "Duplicate Feishu callback "
                                 "(already handled).", check="duplicate_event",
                                 event_id=event_id[:200])
                return DUPLICATE, ""
            try:
                recorded = await self._engine.record_click(
                    click, budget=deadline - time.monotonic(), seen=deferred)
            except AlreadySeen as seen:
                if seen.key.startswith("nonce:") and ctx is not None:
                    ctx.replayed = True  # the endpoint refuses it like any replayed nonce
                    return DUPLICATE, ""
                log.info("duplicate feishu callback ignored (shared)",
                         extra={"event_id": event_id})
                await self.audit(click.ref, click.responder, "Duplicate Feishu callback "
                                 "(already handled).", check="duplicate_event",
                                 event_id=event_id[:200])
                return DUPLICATE, ""
            except ClickTooLarge as exc:
                await self.audit(click.ref, click.responder, str(exc), check="click_too_large")
                return "error", str(exc)
            if recorded is None:
                return "error", NOT_RECORDED
            if handoff is not None and not handoff.stored():
                await self._engine.abandon_click(recorded)  # the clicker was asked to retry
                return "error", NOT_RECORDED
            self._track(asyncio.ensure_future(self._decide_later(recorded)))
            return "info", received_text(click)
        finally:
            self._answering -= 1

    def _answer(self, admitted: Admitted, kind: str, text: str) -> P2CardActionTriggerResponse:
        if kind == DUPLICATE:
            return P2CardActionTriggerResponse({})
        log.info("feishu card callback answered", extra={
            "ref": admitted.click.ref, "event_id": admitted.event_id,
            "operator": admitted.click.responder.user_id, "toast": kind})
        return toast(kind, text)

    async def _decide_later(self, recorded: Recorded) -> None:
        """Decide a stored click once the burst of answers is over, then tell the
        clicker privately unless the card says it all (their answer was taken). If
        deciding fails, the engine hands the click to its worker, which tells them."""
        await self._answers_first()
        recorded = await self._named(recorded)
        async with self._deciding:
            result = await self._engine.decide_click(recorded)
        click = recorded.click
        log.info("feishu click decided", extra={
            "ref": click.ref[:64], "operator": click.responder.user_id,
            "outcome": result.outcome})
        if result.outcome == "accepted" or result.message == DEFERRED:
            return
        try:
            text = await self._humanize(result.message)
            async with self._telling:
                await self._adapter.tell_clicker(
                    click.responder, {**click.reply_to, "click": str(recorded.mark.id)}, text)
        except Exception:
            log.exception("could not tell a feishu clicker the outcome",
                          extra={"ref": click.ref[:64], "outcome": result.outcome})

    async def _named(self, recorded: Recorded) -> Recorded:
        """The click with the clicker's name (contact API, cached, at most 0.5 s), so
        progress lines and results say "Alice (Approve)", not an open_id. A click
        recovered by the worker after a crash goes without; the card then shows the id."""
        who = recorded.click.responder
        if self._names is None or who.display_name:
            return recorded
        try:
            name = await self._names.name(who.user_id, timeout=0.5)
        except Exception:  # a name is nice to have; deciding must not wait on it
            log.warning("feishu name lookup failed", extra={"operator": who.user_id})
            return recorded
        if not name:
            return recorded
        click = dataclasses.replace(recorded.click,
                                    responder=dataclasses.replace(who, display_name=name))
        return dataclasses.replace(recorded, click=click)

    async def _answers_first(self) -> None:
        """Wait while clicks are still being stored and answered (they have a 3 s
        deadline; decisions have none), at most ``ANSWERS_FIRST_PATIENCE`` seconds."""
        give_up = time.monotonic() + ANSWERS_FIRST_PATIENCE
        while time.monotonic() < give_up and (
                self._answering or time.monotonic() - self._last_arrival < ANSWERS_FIRST_QUIET):
            await asyncio.sleep(ANSWERS_FIRST_QUIET)

    def _track(self, task: asyncio.Future[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _humanize(self, text: str) -> str:
        """Engine text for a toast or reply: open_ids become names (plain text has no
        ``<at>``), bounded so the click's reply stays within its budget."""
        if self._names is None:
            return text
        try:
            return await self._names.humanize(text, timeout=min(0.5, self._budget / 4))
        except Exception:
            log.exception("could not replace open_ids with names")
            return OPEN_ID_IN_TEXT.sub(NEUTRAL, text)

    def _schedule_release(self, loop: asyncio.AbstractEventLoop, ref: str) -> None:
        ctx = current_reply.get()
        if ctx is not None:
            ctx.held_refs.append(ref)  # HTTP: released once the response has been sent
            return
        # WS: the SDK sends the ACK right after we return (we are returning now);
        # give it a moment before the parked patch goes out.
        loop.call_soon_threadsafe(
            loop.call_later, self._ws_release_delay, self._adapter.release, ref
        )

    # -- im.message.receive_v1 ----------------------------------------------------------

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
            self._audit_later(None, Identity(PLATFORM, open_id), "Duplicate Feishu message "
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
        self._spawn(self._handle_message(incoming, event_id, self._shared_verdict(event_id)))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        future = asyncio.run_coroutine_threadsafe(coro, self._require_loop())
        self._background.add(future)
        future.add_done_callback(self._background.discard)

    async def _handle_message(
        self, msg: Incoming, event_id: str = "", shared_new: bool | None = None
    ) -> None:
        """``shared_new``: the endpoint's verdict on ``event:{event_id}`` (None: record
        it here, in the same transaction as the message id)."""
        keys = [f"message:{msg.message_id}"]
        if shared_new is None and event_id:
            keys.insert(0, f"event:{event_id}")
        fresh = shared_new is not False and all(await self.first_seen_chain(keys))
        if not fresh:
            # A re-push that another replica (or an earlier run of this one) handled.
            log.info("duplicate feishu message ignored (shared)",
                     extra={"message_id": msg.message_id})
            await self.audit(None, msg.sender, "Duplicate Feishu message event (already "
                             "handled).", check="duplicate_message", event_id=event_id[:200],
                             message_id=msg.message_id[:200])
            return
        try:
            if msg.message_type in FILE_MESSAGE_TYPES:
                await self._attach(msg)
            elif msg.message_type == "text":
                await self._command(msg)
        except Exception:
            log.exception("handling a feishu message failed", extra={"message_id": msg.message_id})

    async def _command(self, msg: Incoming) -> None:
        text = message_text(msg)
        if text is None:
            return
        if msg.chat_type != "p2p" and not msg.mentions:
            return  # in groups we only act when @-mentioned
        if (wanted := pending_command(text)) is not None:
            await self._pending(msg, wanted)
            return
        if (rest := delegate_rest(text)) is not None:
            await self._reply(msg.message_id, await delegate_command(self._engine, msg, rest))
            return
        match = _COMMAND.match(text)
        if match is None:
            if msg.parent_id or msg.root_id:
                return  # chatter in a card's thread, not a command
            await self._reply(msg.message_id, help_text(
                await self._engine.startable_agents(msg.sender), self._adapter.default_locale))
            return
        agent, prompt = match.group(1), match.group(2).strip()
        origin = Origin(PLATFORM, msg.chat_id or None, msg.message_id)
        log.info(
            "feishu run requested",
            extra={"agent": agent, "chat_id": msg.chat_id, "user": msg.sender.user_id},
        )
        try:
            # The engine refuses (audited) anyone who is not one of the agent's starters.
            await self._engine.start_run(agent, prompt, msg.sender, origin)
        except EngineError as exc:
            await self._reply(msg.message_id, str(exc))
        except Exception as exc:
            if database_unreachable(exc):
                log.warning("feishu run failed to start: database unreachable",
                            extra={"agent": agent, "error": type(exc).__name__})
                await self._reply(msg.message_id, DATABASE_DOWN)
                return
            log.exception("feishu run failed to start", extra={"agent": agent})
            await self._reply(msg.message_id, "The run could not be started; see the bot's logs.")

    async def _pending(self, msg: Incoming, number: int) -> None:
        """Reply with one page of the sender's open requests (never silence)."""
        try:
            page = await self._engine.pending_page(msg.sender, number, PENDING_PER_PAGE)
        except Exception as exc:
            down = database_unreachable(exc)
            log.warning("listing pending requests failed", exc_info=not down,
                        extra={"platform": PLATFORM, "error": type(exc).__name__})
            await self._reply(msg.message_id, DATABASE_DOWN if down else
                              "Listing your open requests failed; see the bot's logs.")
            return
        await self._reply(msg.message_id, pending_reply(page))

    async def _attach(self, msg: Incoming) -> None:
        ref = None
        for anchor in (msg.parent_id, msg.root_id):
            if anchor:
                ref = await self._engine.find_by_message(PLATFORM, anchor)
                if ref:
                    break
        if ref is None:
            return  # a file that does not answer one of our cards
        card = await self._engine.card(ref)
        fields = card.args.fields if card else []
        file_fields = [f for f in fields if f.type in ("file", "file-list")]
        if not file_fields:
            await self._reply(msg.message_id, "This request does not ask for files.")
            return
        file_ref = file_reference(msg)
        if file_ref is None:
            return
        result = await self._engine.attach_files(ref, msg.sender, file_fields[0].name, [file_ref])
        log.info(
            "feishu file reply",
            extra={"ref": ref, "user": msg.sender.user_id, "outcome": result.outcome},
        )
        await self._reply(msg.message_id, await self._humanize(result.message))

    async def _reply(self, message_id: str, text: str) -> None:
        try:
            body = plain_text(text) or "…"
            await self._api.reply_message(message_id, "text", dumps({"text": body}))
        except FeishuApiError as exc:
            log.warning("feishu reply failed", extra={"message_id": message_id, "code": exc.code})

    def _require_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("FeishuEventHandlers.bind_loop() was not called")
        return self._loop


def help_text(agents: list[str], locale: str | None = None) -> str:
    """How to start a run, plus the agents the asker may start, in ``locale`` (Feishu
    tells a bot no one's language, so the routes' shared locale is used)."""
    more = (say(locale, "feishu.help_agents", agents=", ".join(agents)) if agents
            else say(locale, "feishu.help_none"))
    return f"{say(locale, 'feishu.help')} {more}"
