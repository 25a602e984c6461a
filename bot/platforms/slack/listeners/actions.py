"""Button clicks on request cards (``block_actions``).

Slack gives us 3 seconds to ack and never resends an acknowledged click, so the click
is stored first, as Slack sent it: the engine records it in the click inbox (one
group-committed insert, bounded by ``ACK_BUDGET``, no read), and only then do we ack.
If it could not be stored in time, the clicker is told to click again (an ack alone
would look like success). Then the engine decides from the stored row and updates
the shared card itself; everything else is explained to the clicker ephemerally,
outside the slots decisions wait for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncAck, AsyncRespond
from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot import metrics
from bot.engine.clicks import NOT_RECORDED
from bot.engine.inbox import Click, ClickTooLarge, Recorded
from bot.engine.ports import Identity
from bot.engine.results import RespondResult
from bot.platforms.slack.client import error_code
from bot.platforms.slack.engine_api import SlackEngine
from bot.platforms.slack.identity import from_interaction
from bot.platforms.slack.replies import audit_refusal, tell
from renderers import slack as render
from renderers.card import WITHDRAW_TOKEN, RequestCard, index_token
from renderers.home import card_state
from renderers.words import Said, said

if TYPE_CHECKING:
    from bot.platforms.slack.home import HomeTab

log = logging.getLogger(__name__)

UNKNOWN_BUTTON = said("button.unknown")
STORED = "askhuman_click"
"""The key of ``ActionListener.before_ack``'s ``Stored`` in Bolt's context."""
ACK_BUDGET = 2.5
"""Seconds a click may take to be stored before we must ack (Slack allows 3)."""


def responder(body: Mapping[str, Any]) -> Identity:
    """The clicker as Slack vouches for them (the payload is signature-checked), with
    their team so Slack Connect guests are told apart."""
    return from_interaction(body)


def message_location(body: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """``(channel, ts)`` of the clicked message."""
    container = body.get("container") or {}
    channel = container.get("channel_id") or (body.get("channel") or {}).get("id")
    ts = container.get("message_ts") or (body.get("message") or {}).get("ts")
    return (str(channel) if channel else None, str(ts) if ts else None)


def home_state(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The Home view's ``state.values`` when the click came from App Home, else None."""
    view = body.get("view")
    container = body.get("container") or {}
    if not isinstance(view, dict) or view.get("type") != "home" or (
            container.get("type") not in (None, "view")):
        return None
    state = view.get("state")
    values = state.get("values") if isinstance(state, dict) else None
    return values if isinstance(values, dict) else {}


@dataclass(frozen=True)
class ClickFrom:
    """What a card click needs from its ``block_actions`` payload besides the action:
    who clicked, where, and the typed input Slack sent with it. Read once, by Bolt's
    listener or by the fast path (``bot.platforms.slack.fast_clicks``)."""

    who: Identity
    channel: str | None
    ts: str | None
    values: Mapping[str, Any] | None
    """The message's ``state.values`` (None when Slack sent none)."""
    home: Mapping[str, Any] | None
    """The Home view's ``state.values`` when the click came from App Home, else None."""

    @classmethod
    def read(cls, body: Mapping[str, Any]) -> ClickFrom:
        state = body.get("state")
        values = state.get("values") if isinstance(state, dict) else None
        channel, ts = message_location(body)
        return cls(responder(body), channel, ts, values if isinstance(values, dict) else None,
                   home_state(body))


@dataclass(frozen=True)
class Stored:
    """A click after its store-before-ack step: stored (``recorded``), or not, with the
    words to tell the clicker instead."""

    where: ClickFrom
    recorded: Recorded | None
    message: Said | None
    path: str
    """How it came in: ``bolt`` or ``fast``."""
    mark: int
    """What ``AcksFirst.arrived`` returned for it (``wait(alone_since=…)``)."""


class AcksFirst:
    """Work after an ack waits while other clicks are still being stored and acked.

    Acks have a deadline (3 s) and decisions do not: in a burst, the event loop and the
    database's write lock go to storing and acking every click first, and the decisions
    follow once nothing has arrived or been acked for ``quiet`` seconds (or after
    ``patience``). Over HTTP the endpoint reports every request too (``arrived`` when it
    comes in, ``acked`` when its response is handed back): a click's ``ack()`` only
    marks the response ready, and the event loop still has to send it, so decisions
    started at the last ``ack()`` would compete with sending the burst's responses.

    A click that nothing arrived after (``wait(alone_since=…)`` with the mark its
    ``arrived`` returned) goes as soon as every response is handed back, without the
    quiet period: an idle server's lone click is not taxed for bursts it is not part
    of. In a burst the others arrive while the first are being stored, so only the
    burst's last click can go early; the rest wait for the quiet as before.
    """

    def __init__(self, quiet: float = 0.02, patience: float = 1.0) -> None:
        self._quiet = quiet
        self._patience = patience
        self._acking = 0
        self._arrivals = 0
        self._last_change = 0.0
        self._waiters: list[tuple[asyncio.Future[None], int | None]] = []
        self._timer: asyncio.TimerHandle | None = None
        """Releases every waiter after ``patience`` (one timer for all of them)."""
        self._timer_loop: asyncio.AbstractEventLoop | None = None

    def arrived(self) -> int:
        """A request came in; returns its mark for ``wait(alone_since=…)``."""
        self._acking += 1
        self._arrivals += 1
        self._last_change = time.monotonic()
        return self._arrivals

    def acked(self) -> None:
        self._acking -= 1
        self._last_change = time.monotonic()
        if self._acking == 0:
            self._release(alone=True)
            asyncio.get_running_loop().call_later(self._quiet, self._check)

    def _alone(self, mark: int | None) -> bool:
        """Every response is handed back and nothing arrived after the ``mark``."""
        return mark == self._arrivals and self._acking == 0

    def _check(self) -> None:
        if not self._waiters or self._acking > 0:
            return
        left = self._quiet - (time.monotonic() - self._last_change)
        if left > 0:
            asyncio.get_running_loop().call_later(left, self._check)
        else:
            self._release()

    def _release(self, alone: bool = False) -> None:
        """Release every waiter (or, with ``alone``, only those nothing arrived after)."""
        if alone:
            go = [entry for entry in self._waiters if self._alone(entry[1])]
            if not go:
                return
            self._waiters = [entry for entry in self._waiters if entry not in go]
        else:
            go, self._waiters = self._waiters, []
        if not self._waiters and self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for waiter, _ in go:
            if not waiter.done():
                with contextlib.suppress(RuntimeError):  # its loop is gone
                    waiter.set_result(None)

    async def wait(self, alone_since: int | None = None) -> None:
        """Until the burst is over, or, given the mark ``arrived`` returned, until every
        response is handed back if nothing arrived after it. Each waiter is a bare
        future released by ``acked`` or ``_check`` (or the shared ``patience`` timer):
        after the final commit of a burst, every click's listener passes here, and a
        task plus a timer each cost that moment about as much as the ack itself."""
        if self._alone(alone_since) or (
                self._acking == 0 and time.monotonic() - self._last_change >= self._quiet):
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append((waiter, alone_since))
        if self._timer is None or self._timer_loop is not loop:
            self._timer, self._timer_loop = loop.call_later(self._patience, self._release), loop
        self._check()
        await waiter


class ActionListener:
    """Approve / Reject / any action button of a request card.

    Decisions run at most ``concurrency`` at a time after the ack: a burst of clicks (a
    double-click storm, a busy channel) then spends the event loop on storing and
    acking everyone first. Replies to the clicker are sent after a decision has left
    its slot, so a slow ``chat.postEphemeral`` never holds back someone else's
    decision; they have slots of their own (``replies``), so a burst of refusals does
    not crowd out the acks either.
    """

    def __init__(self, engine: SlackEngine, *, concurrency: int = 4, replies: int = 4,
                 home: HomeTab | None = None, acks_first: AcksFirst | None = None) -> None:
        self._engine = engine
        self._home = home
        self._slots = asyncio.Semaphore(concurrency)
        self._reply_slots = asyncio.Semaphore(replies)
        self._acks_first = acks_first or AcksFirst()

    async def before_ack(self, body: dict[str, Any], action: dict[str, Any],
                         context: AsyncBoltContext, next: Callable[[], Awaitable[None]]
                         ) -> None:
        """(listener middleware) Store the click before Bolt starts its ack clock.

        Bolt waits ``ack_timeout`` (3 s) for a listener's ack, counted from when it
        starts the listener, and then answers 404 "unhandled request". Stored inside
        the listener, a click that took its whole budget (``ACK_BUDGET``) on a busy
        loop could pass that: Slack got a 404 for a click that was stored and decided,
        or whose clicker was then told it was not. Bolt runs this middleware before
        that clock starts, so ``__call__`` acks at its first step, as the fast path
        (``fast_clicks``) answers as soon as the click is stored."""
        parsed = self.parse(action)
        if parsed is not None:
            context[STORED] = await self.store(parsed, ClickFrom.read(body), path="bolt")
        await next()

    async def __call__(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        action: dict[str, Any],
        client: AsyncWebClient,
        respond: AsyncRespond,
        context: AsyncBoltContext,
    ) -> None:
        """Bolt's entry, after ``before_ack``; ``bot.platforms.slack.fast_clicks`` takes
        the same steps (``store``, its own ack, ``finish``) for plain clicks Bolt never
        sees."""
        stored = context.get(STORED)
        await ack()  # only now: the click is in the database (or the clicker is told)
        if isinstance(stored, Stored):
            await self.finish(stored, client, respond)
            return
        where = ClickFrom.read(body)
        await audit_refusal(self._engine, None, where.who, str(UNKNOWN_BUTTON),
                            check="unknown_button",
                            action_id=str(action.get("action_id") or "")[:200])
        await tell(client, user=where.who.user_id, channel=where.channel,
                   text=UNKNOWN_BUTTON, respond=respond)

    kind = "respond"
    """The click inbox ``kind`` this listener stores."""

    async def store(self, parsed: tuple[str, str], where: ClickFrom, *, path: str) -> Stored:
        """Before the ack: the click into the click inbox (never raises). ``path`` names
        the way the click came in (``bolt`` or ``fast``), for the log and the counter."""
        ref, token = parsed
        metrics.slack_click(path)
        mark = self._acks_first.arrived()
        try:
            recorded, message = await self._record(ref, token, where, self.kind)
        except Exception:
            log.exception("recording a click failed", extra={"platform": "slack", "ref": ref[:64]})
            recorded, message = None, NOT_RECORDED
        finally:
            self._acks_first.acked()
        return Stored(where, recorded, message, path, mark)

    async def finish(self, stored: Stored, client: AsyncWebClient,
                     respond: AsyncRespond | None) -> None:
        """After the ack: decide the stored click, then tell the clicker what they need
        to know (on App Home, on top of a fresh Home)."""
        message, where = stored.message, stored.where
        if stored.recorded is not None:
            await self._acks_first.wait(alone_since=stored.mark)
            async with self._slots:
                message = await self._decide(stored.recorded, stored.path)
        if where.home is not None and self._home is not None:
            # Home has no ephemeral messages: the notice goes on top of a fresh Home.
            async with self._reply_slots:
                await self._home.publish(where.who.user_id, notice=message, force=True)
        elif message is not None:
            async with self._reply_slots:
                await tell(client, user=where.who.user_id, channel=where.channel, text=message,
                           respond=respond)

    @staticmethod
    def parse(action: Mapping[str, Any]) -> tuple[str, str] | None:
        """``(ref, action token)`` of one of our buttons, or None."""
        return render.parse_action_id(action.get("action_id")) or render.parse_action_id(
            action.get("value"))

    async def _record(
        self, ref: str, token: str, where: ClickFrom, kind: str = "respond",
    ) -> tuple[Recorded | None, Said | None]:
        """Store the click before the ack: ``(recorded, None)``, or ``(None, text to tell)``
        when it could not be stored. No database read on this path: the values are
        stored as Slack sent them and read with the card when deciding
        (``SlackAdapter.read_click``)."""
        state_values = where.values
        if where.home is not None:
            state_values = card_state(where.home, ref)
        if not isinstance(state_values, dict) or kind != "respond":
            state_values = {}  # a withdrawal carries no answer
        reply_to = {k: v for k, v in (("channel", where.channel), ("message", where.ts)) if v}
        click = Click("slack", ref, where.who, token, state_values, kind=kind,
                      reply_to=reply_to)
        try:
            recorded = await self._engine.record_click(click, budget=ACK_BUDGET)
        except ClickTooLarge as exc:
            await audit_refusal(self._engine, ref, where.who, str(exc), check="click_too_large")
            return None, exc.words
        return recorded, None if recorded is not None else NOT_RECORDED

    async def _decide(self, recorded: Recorded, path: str) -> Said | None:
        """Decide the stored click; returns the words to tell the clicker, if any."""
        result = await self._engine.decide_click(recorded)
        self._log(recorded.click.ref, recorded.click.responder, recorded.click.action_id,
                  result, path)
        if result.outcome == "accepted" and not result.tell:
            return None  # the updated card says it for everyone
        return result.words

    @staticmethod
    def _log(ref: str, who: Identity, action_id: str, result: RespondResult,
             path: str) -> None:
        log.info(
            "slack click answered",
            extra={
                "platform": "slack",
                "ref": ref[:64],
                "user": who.user_id,
                "action_id": action_id[:64],
                "outcome": result.outcome,
                "path": path,
            },
        )


class WithdrawListener(ActionListener):
    """The "Withdraw" item of a card's overflow menu (``ahw:{ref}``): stored in the click
    inbox as ``kind="withdraw"`` before the ack, then decided like any click; the engine
    allows only the run's starter and admins, and anyone else is told why."""

    kind = "withdraw"

    @staticmethod
    def parse(action: Mapping[str, Any]) -> tuple[str, str] | None:
        ref = render.parse_withdraw_action_id(action.get("action_id"))
        selected = action.get("selected_option")
        chosen = selected.get("value") if isinstance(selected, dict) else None
        return (ref, WITHDRAW_TOKEN) if ref and chosen == WITHDRAW_TOKEN else None


class FileButtonListener:
    """ "Attach files…" opens a modal with ``file_input`` (modal-only in Slack).

    ``trigger_id`` expires 3 s after the click, so the modal opens before anything
    slow; the engine authorizes and stages the files when the modal is submitted.
    """

    def __init__(self, engine: SlackEngine) -> None:
        self._engine = engine

    async def __call__(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        action: dict[str, Any],
        client: AsyncWebClient,
        respond: AsyncRespond,
    ) -> None:
        await ack()
        who = responder(body)
        channel, ts = message_location(body)
        parsed = render.parse_file_action_id(action.get("action_id"))
        card = await self._engine.card(parsed[0]) if parsed else None
        if parsed is None or card is None or not channel or not ts:
            await audit_refusal(self._engine, parsed[0] if parsed else None, who,
                                str(UNKNOWN_BUTTON),
                                check="unknown_file_button",
                                action_id=str(action.get("action_id") or "")[:200])
            await tell(
                client, user=who.user_id, channel=channel, text=UNKNOWN_BUTTON, respond=respond
            )
            return
        if card.status != "pending":
            closed = said("closed.already")
            await audit_refusal(self._engine, card.ref, who, str(closed),
                                check="file_button_closed", status=card.status)
            await tell(client, user=who.user_id, channel=channel, respond=respond, text=closed)
            return
        field_name = _field_name(card, parsed[1])
        try:
            view = render.file_modal(card, channel, ts, field_name=field_name)
            await client.views_open(trigger_id=str(body.get("trigger_id") or ""), view=view)
        except (SlackApiError, SlackClientError, ValueError) as exc:
            log.warning(
                "views.open failed",
                extra={"platform": "slack", "ref": card.ref, "error": error_code(exc)},
            )
            await tell(
                client,
                user=who.user_id,
                channel=channel,
                respond=respond,
                text=said("upload.not_opened"),
            )


def _field_name(card: RequestCard, token: str) -> str | None:
    """A field name or ``#index`` token → the field's name (None shows all file fields)."""
    index = index_token(token, "#")
    if index is not None:
        return card.args.fields[index].name if index < len(card.args.fields) else None
    return token if any(f.name == token for f in card.args.fields) else None


async def ignore_other_actions(ack: AsyncAck) -> None:
    """Inputs that dispatch actions (or foreign buttons) only need an ack."""
    await ack()
