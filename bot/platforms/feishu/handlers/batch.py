"""Batch decisions on Feishu: the ``pending`` list card and its "Approve selected" /
"Reject selected" buttons.

A list button's callback is answered like a card click: this process's dedupe and the
replay window first, then one click per ticked request is stored in the engine's
click inbox (one group commit) before the toast, which is the acknowledgement. The
items are then decided, each as a lone click would be. Decided within the inline
budget, the toast says what happened; otherwise it says "received", honestly, and the
outcome follows. Either way the list card is patched after the reply with the answer
on top of a fresh list. Every request card is patched by the engine's outbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from lark_oapi.event.callback.model.p2_card_action_trigger import (
    P2CardActionTrigger,
    P2CardActionTriggerResponse,
)

from bot.engine.batch import BatchResult
from bot.engine.clicks import NOT_RECORDED
from bot.engine.ports import Identity
from bot.platforms.feishu.adapter import FeishuAdapter
from bot.platforms.feishu.client import FeishuApi, FeishuApiError, dumps
from bot.platforms.feishu.engine_api import EngineApi
from bot.platforms.feishu.handlers.loop import MainLoop
from bot.platforms.feishu.handlers.toasts import toast
from bot.platforms.feishu.pending import PENDING_PER_PAGE
from bot.platforms.feishu.replay import ReplayGuard, parse_epoch
from renderers.feishu_batch import batch_card, read_batch
from renderers.words import Said, said

log = logging.getLogger("askhuman.feishu.events")

PLATFORM = "feishu"
INLINE_SECONDS = 1.5
"""How long the toast waits for the decisions once the batch is stored."""
PATCH_DELAY = 0.3
"""Feishu shows a patch of the clicked card only after the click's reply."""


async def _same(words: Said) -> Said:
    return words


Humanize = Callable[[Said], Awaitable[Said]]
"""Engine words with open_ids turned into names (``Replies``)."""


class BatchClicks:
    """Answers list-button callbacks; ``list_card`` renders the list for ``pending``."""

    def __init__(self, engine: EngineApi, adapter: FeishuAdapter, api: FeishuApi,
                 guard: ReplayGuard, loop: MainLoop, *, reply_budget: float = 2.5,
                 humanize_now: Humanize = _same, humanize: Humanize = _same) -> None:
        self._engine = engine
        self._adapter = adapter
        self._api = api
        self._guard = guard
        self._loop = loop
        self._budget = reply_budget
        self._humanize_now = humanize_now
        self._humanize = humanize

    async def list_card(self, who: Identity, page: int = 1, answer: str | None = None
                        ) -> dict[str, Any]:
        listed = await self._engine.pending_page(who, page, PENDING_PER_PAGE)
        return batch_card(listed.cards, listed.routes, listed.total, page=listed.page,
                          pages=listed.pages, locale=self._adapter.default_locale,
                          answer=answer)

    async def answer(self, data: P2CardActionTrigger, deadline: float | None = None
                     ) -> P2CardActionTriggerResponse:
        """The toast for a list button (on the main loop), due by ``deadline``
        (``time.monotonic``; default: the reply budget from now); never raises."""
        due = deadline if deadline is not None else time.monotonic() + self._budget
        locale = self._adapter.default_locale
        try:
            header, event = data.header, data.event
            event_id = getattr(header, "event_id", None) or ""
            if not self._guard.first_event(event_id):
                return P2CardActionTriggerResponse({})
            created = parse_epoch(getattr(header, "create_time", None))
            if created is None or not self._guard.fresh(created):
                return toast("error", said("click.too_old"), locale)
            operator = getattr(getattr(event, "operator", None), "open_id", None)
            action = getattr(event, "action", None)
            read = read_batch(getattr(action, "value", None),
                              getattr(action, "form_value", None))
            context = getattr(event, "context", None)
            message_id = str(getattr(context, "open_message_id", None) or "")
            chat_id = str(getattr(context, "open_chat_id", None) or "")
            if not operator or read is None:
                return toast("error", said("button.invalid"), locale)
            verb, refs, reason = read
            if not refs:
                return toast("error", said("batch.none_selected"), locale)
            who = Identity(PLATFORM, str(operator))
            reply_to = {k: v for k, v in (("message", message_id), ("chat", chat_id),
                                          ("locale", locale)) if v}
            stored = await self._engine.record_batch(
                who, verb, refs, reason, reply_to, max(0.1, due - time.monotonic() - 0.3))
            if not stored.stored_any:
                return toast("error", NOT_RECORDED, locale)
            task = asyncio.ensure_future(self._engine.decide_batch(stored))
            self._loop.track(task)
            done, _ = await asyncio.wait({task}, timeout=min(
                INLINE_SECONDS, max(0.0, due - 0.2 - time.monotonic())))
            self._loop.track(asyncio.ensure_future(self._patch_after(task, who, message_id)))
            if not done:
                return toast("info", said("batch.received", count=len(stored.recorded)),
                             locale)
            result = task.result()
            kind = "error" if result.refused else "info" if result.deferred else "success"
            return toast(kind, await self._humanize_now(result.words), locale)
        except Exception:
            log.exception("feishu batch callback failed")
            return toast("error", said("click.failed"), locale)

    async def _patch_after(self, task: asyncio.Future[BatchResult], who: Identity,
                           message_id: str) -> None:
        """Once decided and the reply is out: the answer on top of a fresh list."""
        result = await task
        await asyncio.sleep(PATCH_DELAY)
        if not message_id:
            return
        try:
            words = await self._humanize(result.words)
            card = await self.list_card(who, answer=words.text(self._adapter.default_locale))
            await self._api.patch_message(message_id, dumps(card))
        except (FeishuApiError, OSError, TimeoutError) as exc:
            log.warning("could not patch the pending list; telling the clicker",
                        extra={"message_id": message_id, "error": str(exc)[:200]})
            with contextlib.suppress(Exception):
                await self._adapter.tell_clicker(who, {"message": message_id}, result.words)
        except Exception:
            log.exception("could not patch the pending list")
