"""Feishu ``PlatformAdapter``: send request cards, patch them, reply with run results.

The one subtle rule lives here: Feishu rolls back a card if it is patched while the
click that caused the patch is still waiting for its 3-second reply. So every card
callback "holds" its request until the reply has gone out; ``update`` calls for a held
request wait for the release (or the hold's timeout) and then patch, raising on failure
so the engine's outbox retries the patch.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from bot.engine.ports import (
    DeliveryError,
    DeliveryRef,
    DeliveryTarget,
    Identity,
    Origin,
    PostKey,
)
from bot.platforms.feishu.client import FeishuApi, FeishuApiError, dumps
from bot.platforms.feishu.errors import feishu_words
from renderers.card import RequestCard
from renderers.feishu import render_card
from renderers.feishu_values import read_edits, read_values
from renderers.i18n import normalize, say
from renderers.markdown import message_text
from renderers.tool_edits import EDITED
from renderers.words import Said

log = logging.getLogger("askhuman.feishu.adapter")

MAX_CARD_BYTES = 30 * 1024
"""Feishu's limit for a card message body (send, reply and patch)."""
MAX_TEXT_CHARS = 20_000
MAX_TRACKED_MESSAGES = 10_000
HOLD_TIMEOUT_SECONDS = 5.0
"""A held request is patched at the latest after this, even if no release came."""


def delivery_uuid(ref: str, target: DeliveryTarget) -> str:
    """Idempotency key for one request to one target: a retried send is a no-op.

    Feishu accepts at most 50 characters; a hex digest of 32 keeps it opaque and short.
    """
    digest = hashlib.sha256(f"askhuman|{ref}|{target.kind}|{target.id}".encode()).hexdigest()
    return digest[:32]


def post_uuid(key: PostKey | None, fallback: str) -> str:
    """Idempotency key of one engine post (run result, reminder): derived from its
    ``PostKey``, which names the outbox item, so every retry of that post is deduped by
    Feishu (for about an hour) and two different posts never are. ``fallback`` names
    the post when no key was given."""
    name = f"askhuman|post|{key.id}" if key is not None else fallback
    return hashlib.sha256(name.encode()).hexdigest()[:32]


def receive_id_type(target: DeliveryTarget) -> str:
    """How Feishu should read ``target.id``: chat, email, open_id, union_id or user_id."""
    if target.kind == "channel":
        return "chat_id"
    if "@" in target.id:
        return "email"
    if target.id.startswith("ou_"):
        return "open_id"
    if target.id.startswith("on_"):
        return "union_id"
    return "user_id"


def plain_text(text: str) -> str:
    """Make untrusted text safe for a ``text`` message: no ``<at>`` mentions (no @all),
    no ``[label](url)`` links, no control characters (``renderers.markdown``)."""
    return message_text(text, MAX_TEXT_CHARS)


def ephemeral_card(text: str) -> dict[str, Any]:
    """A one-paragraph card (plain text: no mentions, no links) for ``ephemeral/v1/send``,
    which takes a card object in one language."""
    shown = plain_text(text) or "…"
    return {"config": {"wide_screen_mode": True},
            "elements": [{"tag": "div", "text": {"tag": "plain_text", "content": shown}}]}


def refused(detail: str, exc: BaseException) -> DeliveryError:
    """``DeliveryError`` with the API detail for the log/audit and words for people."""
    if isinstance(exc, DeliveryError):
        return exc
    code = exc.code if isinstance(exc, FeishuApiError) else None
    return DeliveryError(detail, reason=feishu_words(exc), code=code)


@dataclass
class _Hold:
    count: int = 0
    released: asyncio.Event = field(default_factory=asyncio.Event)


class FeishuAdapter:
    """Implements ``bot.engine.ports.PlatformAdapter`` for Feishu."""

    platform = "feishu"
    clicks_name_their_message = True
    """A stored click's ``reply_to["message"]`` is the card it came from: the engine
    checks that message carries the clicked request before deciding (``bot.engine.clicks``)."""
    updates_cards_after_reply = True
    """A card patch waits until the click's reply has been sent (``update``), so the
    engine must not await a click's card update inside its decision."""

    def __init__(self, api: FeishuApi, hold_timeout: float = HOLD_TIMEOUT_SECONDS,
                 default_locale: str = "en") -> None:
        self._api = api
        self.default_locale = normalize(default_locale)
        self._locales: dict[str, str] = {}
        self._hold_timeout = hold_timeout
        self._holds: dict[str, _Hold] = {}
        self._patch_locks: dict[str, asyncio.Lock] = {}
        self._patched_versions: dict[str, int] = {}

    # -- PlatformAdapter ---------------------------------------------------------------

    async def deliver(
        self, card: RequestCard, target: DeliveryTarget, key: PostKey | None = None
    ) -> DeliveryRef:
        """Send the card; raise ``DeliveryError`` once retries are exhausted.

        The send's ``uuid`` (``delivery_uuid``: request and target) already names this
        card for this target, so a retry within Feishu's dedupe window returns the
        message an interrupted try created; ``key`` is not needed."""
        content = self._render(card)
        self._remember_locale(card)
        id_type = receive_id_type(target)
        try:
            sent = await self._api.send_message(
                id_type, target.id, "interactive", content, delivery_uuid(card.ref, target)
            )
        except FeishuApiError as exc:
            raise refused(f"Feishu refused the card for {target.kind}: {exc}", exc) from exc
        log.info(
            "feishu card delivered",
            extra={"ref": card.ref, "message_id": sent.message_id, "receive_id_type": id_type},
        )
        channel = sent.chat_id or (target.id if target.kind == "channel" else "")
        return DeliveryRef(platform=self.platform, channel=channel, message_id=sent.message_id)

    async def update(self, card: RequestCard, ref: DeliveryRef) -> None:
        """Patch the card for everyone; wait for a pending callback reply first.

        Held by a click still being answered: this call waits (asynchronously) until
        the reply has been sent (``release``) or the hold's safety timeout passed, then
        patches. Errors always surface to the engine's outbox, so a failed patch is
        retried: ``DeliveryError`` when Feishu refuses for good, ``FeishuApiError``
        when the client's own retries ran out.

        Because this waits for the click's reply, the engine must not await it inside
        the click's decision (``updates_cards_after_reply``: the engine then sends that
        update in the background); otherwise the reply would wait for the hold's
        timeout.
        """
        await self.replied(card.ref)
        await self._patch(card, ref)

    async def replied(self, key: str) -> None:
        """Until the callback reply held under ``key`` (a request ref, or any key a
        handler ``hold``s) has been sent, or the hold's safety timeout passed: Feishu
        rolls back a card edited before the click's reply went out."""
        hold = self._holds.get(key)
        if hold is not None and not hold.released.is_set():
            try:
                await asyncio.wait_for(hold.released.wait(), self._hold_timeout)
            except TimeoutError:
                log.warning("feishu reply hold timed out; patching anyway",
                            extra={"ref": key})

    async def post_run_result(
        self, origin: Origin, text: str, key: PostKey | None = None
    ) -> None:
        """Reply in the thread that started the run (or post to its chat)."""
        content = dumps({"text": plain_text(text) or "(empty result)"})
        # The engine's outbox may retry this call: the uuid makes Feishu drop repeats.
        uuid = post_uuid(key, f"result|{origin.channel}|{origin.thread}|{text}")
        try:
            if origin.thread:
                await self._api.reply_message(origin.thread, "text", content, uuid)
            elif origin.channel:
                await self._api.send_message("chat_id", origin.channel, "text", content, uuid)
        except FeishuApiError as exc:
            log.error(
                "could not post feishu run result",
                extra={"chat_id": origin.channel, "thread_id": origin.thread, "code": exc.code},
            )
            if not exc.retryable:
                raise refused(str(exc), exc) from exc
            raise

    async def remind(
        self, card: RequestCard, ref: DeliveryRef, text: str, key: PostKey | None = None
    ) -> None:
        """Reply to the card message with a plain-text reminder (``im.v1.message.reply``).

        The uuid (from the reminder's ``PostKey``, else card message + reminder text,
        which carries the reminder's number) makes an outbox retry a no-op on Feishu's side.
        """
        content = dumps({"text": plain_text(text) or "Reminder: still waiting."})
        uuid = post_uuid(key, f"remind|{card.ref}|{ref.message_id}|{text}")
        try:
            await self._api.reply_message(ref.message_id, "text", content, uuid)
        except FeishuApiError as exc:
            log.error(
                "could not post feishu reminder",
                extra={"ref": card.ref, "message_id": ref.message_id, "code": exc.code},
            )
            if not exc.retryable:
                raise refused(str(exc), exc) from exc
            raise
        log.info("feishu reminder posted", extra={"ref": card.ref, "message_id": ref.message_id})

    async def tell_clicker(self, who: Identity, reply_to: Mapping[str, str],
                           words: Said) -> None:
        """Tell one person, in the card's locale, what became of their card click once
        it was decided after its toast (a vote that lost a race, a refusal found late,
        a click decided after a restart); the card itself shows the outcome to everyone.

        Where they clicked: an ephemeral card in the group chat that only they see
        (``ephemeral/v1/send``). Where no ephemeral card can go (the card was sent to
        them directly, a p2p chat; a topic group; a chat the bot left), a message in
        their chat with the bot, whose uuid makes a retried send a no-op. A rate limit
        or server error is raised after the client's retries, so the caller (the
        engine's worker) retries later: nothing is lost."""
        locale = reply_to.get("locale") or self.default_locale
        chat = reply_to.get("chat")
        if chat and reply_to.get("direct") != "1":
            try:
                await self._api.send_ephemeral(chat, who.user_id,
                                               ephemeral_card(words.text(locale)))
                return
            except FeishuApiError as exc:
                if exc.retryable:
                    log.warning("could not tell the clicker in the chat; retried later",
                                extra={"code": exc.code, "status": exc.status})
                    raise
                log.info("no ephemeral card possible here; telling the clicker directly",
                         extra={"code": exc.code, "chat_id": chat})
        about = say(locale, "click.about", text=words.text(locale))
        content = dumps({"text": plain_text(about)})
        # One message per click (``click``: its inbox row), however often it is retried.
        key = (f"tell|{who.user_id}|{reply_to.get('message', '')}|{reply_to.get('click', '')}"
               f"|{words}")
        uuid = hashlib.sha256(key.encode()).hexdigest()[:32]
        try:
            await self._api.send_message("open_id", who.user_id, "text", content, uuid)
        except FeishuApiError as exc:
            log.warning("could not tell the clicker", extra={"code": exc.code})
            if exc.retryable:
                raise

    @staticmethod
    def read_click(
        card: RequestCard, action_id: str, values: Mapping[str, Any]
    ) -> tuple[str, dict[str, JsonValue]]:
        """A stored click's button action and raw ``form_value`` → ``(action id, values)``
        (the handlers store clicks before the toast, without reading the card). "Edit and
        approve" adds the edited arguments as ``edited`` (the engine checks them)."""
        read = read_values(values, card)
        if card.tool is not None and card.tool.editable:  # checked by the engine: a plain
            read[EDITED] = dict(read_edits(values, card))  # Approve must not drop an edit
        return action_id, read

    def locale_of(self, request_ref: str) -> str:
        """The locale of ``request_ref``'s card as last sent or patched by this process
        (the platform's default otherwise): a toast needs it without a database read."""
        return self._locales.get(request_ref, self.default_locale)

    def _remember_locale(self, card: RequestCard) -> None:
        self._locales[card.ref] = normalize(card.locale)
        while len(self._locales) > MAX_TRACKED_MESSAGES:
            del self._locales[next(iter(self._locales))]

    # -- callback holds (used by the event handlers) ------------------------------------

    def hold(self, request_ref: str) -> None:
        """A callback for ``request_ref`` is being answered: park patches until release."""
        hold = self._holds.get(request_ref)
        if hold is None or hold.released.is_set():
            hold = self._holds[request_ref] = _Hold()
        hold.count += 1

    def release(self, request_ref: str) -> None:
        """The callback reply has been sent; parked patches may run now."""
        hold = self._holds.get(request_ref)
        if hold is None:
            return
        hold.count -= 1
        if hold.count <= 0:
            hold.released.set()
            del self._holds[request_ref]

    # -- internals ---------------------------------------------------------------------

    async def _patch(self, card: RequestCard, ref: DeliveryRef) -> None:
        lock = self._patch_locks.setdefault(ref.message_id, asyncio.Lock())
        async with lock:
            # Patches of one message are serialized; never overwrite a newer version.
            if self._patched_versions.get(ref.message_id, -1) > card.version:
                return
            try:
                content = self._render(card)
                await self._api.patch_message(ref.message_id, content)
            except (FeishuApiError, DeliveryError) as exc:
                log.error(
                    "could not patch feishu card",
                    extra={"ref": card.ref, "message_id": ref.message_id, "error": str(exc)},
                )
                if isinstance(exc, FeishuApiError) and not exc.retryable:
                    raise refused(str(exc), exc) from exc
                raise
            self._patched_versions[ref.message_id] = card.version
            self._remember_locale(card)
            self._forget_old_messages()
            log.info(
                "feishu card patched",
                extra={"ref": card.ref, "message_id": ref.message_id, "status": card.status},
            )

    def _forget_old_messages(self) -> None:
        """Bound the per-message bookkeeping (old cards are rarely patched again)."""
        while len(self._patched_versions) > MAX_TRACKED_MESSAGES:
            oldest = next(iter(self._patched_versions))
            del self._patched_versions[oldest]
            lock = self._patch_locks.get(oldest)
            if lock is not None and not lock.locked():
                del self._patch_locks[oldest]

    @staticmethod
    def _render(card: RequestCard) -> str:
        content = dumps(render_card(card))
        if len(content.encode("utf-8")) > MAX_CARD_BYTES:
            raise DeliveryError(f"card for {card.ref} exceeds Feishu's 30 KB limit",
                                reason="The card was too large for Feishu.")
        return content
