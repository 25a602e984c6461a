"""Card clicks (``card.action.trigger``): a toast within the reply budget, first.

A Revoke click on the standing-grants card goes to ``grant_clicks`` instead.

The HTTP endpoint calls ``answer_click`` on the main loop (no thread, no second
decryption). The long connection's SDK calls ``on_card_action`` synchronously on its
own thread, which hands the click to the main loop with ``run_coroutine_threadsafe``
and waits for it to be stored. Either way the card's patches are held until the reply
has gone out. The whole path, from click to decision, is described in the package's
docstring (``bot.platforms.feishu.handlers``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time

from lark_oapi.event.callback.model.p2_card_action_trigger import (
    P2CardActionTrigger,
    P2CardActionTriggerResponse,
)

from bot.engine.clicks import NOT_RECORDED
from bot.platforms.feishu.adapter import FeishuAdapter
from bot.platforms.feishu.handlers.admission import Admitted, ClickAdmission
from bot.platforms.feishu.handlers.batch import BatchClicks
from bot.platforms.feishu.handlers.click_store import DUPLICATE, ClickStore, Handoff, Reply
from bot.platforms.feishu.handlers.grant_clicks import GrantClick, GrantClicks, hold_key
from bot.platforms.feishu.handlers.loop import MainLoop
from bot.platforms.feishu.handlers.toasts import RECEIVED, toast
from bot.platforms.feishu.reply_context import current_reply
from renderers.feishu_batch import is_batch_value
from renderers.words import Said, said

log = logging.getLogger("askhuman.feishu.events")


class ClickListener:
    """Answers each click with a toast within the reply budget; never raises."""

    def __init__(
        self,
        admission: ClickAdmission,
        store: ClickStore,
        adapter: FeishuAdapter,
        loop: MainLoop,
        *,
        reply_budget: float = 2.5,
        ws_release_delay: float = 0.3,
        grants: GrantClicks | None = None,
        batches: BatchClicks | None = None,
    ) -> None:
        self._grants = grants
        self._admission = admission
        self._store = store
        self._adapter = adapter
        self._loop = loop
        self._budget = reply_budget
        self._ws_release_delay = ws_release_delay
        self._batches = batches

    def on_card_action(self, data: P2CardActionTrigger) -> P2CardActionTriggerResponse:
        """The long connection's click (on the SDK's thread): answer within the budget;
        never raises (the SDK would 500)."""
        try:
            return self._card_action(data)
        except Exception:
            log.exception("feishu card callback failed")
            return toast("error", said("click.failed"))

    async def answer_click(self, data: P2CardActionTrigger) -> P2CardActionTriggerResponse:
        """An HTTP callback's click, on the main loop (no thread hop): the endpoint has
        checked the signature, decrypted once and recorded nonce and event id. Answers
        as soon as the click is stored; never raises."""
        try:
            if self._grants is not None and self._grants.claims(data):
                return await self._grant_click(data)
            if self._batches is not None and _from_list(data):
                reply = current_reply.get()  # the budget runs from the request's arrival
                began = reply.started if reply is not None else time.monotonic()
                return await self._batches.answer(data, began + self._budget)
            admitted = self._admission.admit(data)
            if not isinstance(admitted, Admitted):
                return admitted
            ref = admitted.click.ref
            self._adapter.hold(ref)  # before any await: patches wait for this reply
            self._schedule_release(self._loop.require(), ref)
            ctx = current_reply.get()
            started = ctx.started if ctx is not None else time.monotonic()
            return self._answer(admitted, *await self._store.store(
                admitted, started + self._budget, None, started))
        except Exception:
            log.exception("feishu card callback failed")
            return toast("error", said("click.failed"))

    async def _grant_click(self, data: P2CardActionTrigger) -> P2CardActionTriggerResponse:
        """An HTTP Revoke click on the standing-grants card, on the main loop."""
        assert self._grants is not None
        checked = self._grants.check(data)
        if not isinstance(checked, GrantClick):
            return checked
        ctx = current_reply.get()
        started = ctx.started if ctx is not None else time.monotonic()
        return await self._grants.answer(checked, started + self._budget)

    def _grant_card_action(self, grants: GrantClicks, data: P2CardActionTrigger
                           ) -> P2CardActionTriggerResponse:
        """A long-connection Revoke click (on the SDK's thread)."""
        checked = grants.check(data)
        if not isinstance(checked, GrantClick):
            return checked
        loop = self._loop.require()
        future = asyncio.run_coroutine_threadsafe(
            grants.answer(checked, time.monotonic() + self._budget), loop)
        try:
            return future.result(timeout=self._budget + 0.5)
        except concurrent.futures.TimeoutError:
            return toast("info", RECEIVED, checked.locale)  # the card will say the outcome
        finally:
            loop.call_soon_threadsafe(loop.call_later, self._ws_release_delay,
                                      self._adapter.release, hold_key(checked))

    def _card_action(self, data: P2CardActionTrigger) -> P2CardActionTriggerResponse:
        if self._grants is not None and self._grants.claims(data):
            return self._grant_card_action(self._grants, data)
        if self._batches is not None and _from_list(data):
            due = time.monotonic() + self._budget  # the toast's deadline, from here
            return asyncio.run_coroutine_threadsafe(
                self._batches.answer(data, due), self._loop.require()).result(
                    self._budget + 0.5)
        admitted = self._admission.admit(data)
        if not isinstance(admitted, Admitted):
            return admitted
        loop = self._loop.require()
        ref = admitted.click.ref
        deadline = time.monotonic() + self._budget
        handoff = Handoff()
        future = asyncio.run_coroutine_threadsafe(
            self._held_store(admitted, deadline, handoff), loop)
        locale = admitted.click.reply_to.get("locale")
        try:
            reply = future.result(timeout=max(deadline - time.monotonic(), 0.0))
        except concurrent.futures.TimeoutError:
            if not handoff.give_up():
                log.warning("feishu click not stored within the reply budget",
                            extra={"ref": ref})
                return toast("error", NOT_RECORDED, locale)
            reply = ("info", RECEIVED, locale)  # stored; still being decided
        finally:
            self._schedule_release(loop, ref)
        return self._answer(admitted, *reply)

    async def _held_store(self, admitted: Admitted, deadline: float, handoff: Handoff
                          ) -> Reply:
        self._adapter.hold(admitted.click.ref)  # before the first await
        return await self._store.store(admitted, deadline, handoff)

    def _answer(self, admitted: Admitted, kind: str, text: Said | str,
                locale: str | None) -> P2CardActionTriggerResponse:
        if kind == DUPLICATE:
            return P2CardActionTriggerResponse({})
        log.info("feishu card callback answered", extra={
            "ref": admitted.click.ref, "event_id": admitted.event_id,
            "operator": admitted.click.responder.user_id, "toast": kind,
            "said": text.key if isinstance(text, Said) else ""})
        return toast(kind, text, locale)

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


def _from_list(data: P2CardActionTrigger) -> bool:
    """A pending list's button (``renderers.feishu_batch``), not a request card's."""
    return is_batch_value(getattr(getattr(data.event, "action", None), "value", None))
