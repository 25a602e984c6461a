"""``PlatformAdapter`` for Slack: post cards, update them, post run results.

The engine calls these after its transactions commit. Transient Slack trouble is
retried by the client's handlers; what is left is permanent, so ``deliver`` raises
``DeliveryError`` (the engine resolves the request ``unavailable``) while ``update``
and ``post_run_result`` log and carry on: the decision is already stored, and a
stale card must never undo it.

Posts are idempotent across the engine's retries: each one carries its ``PostKey`` in
the message ``metadata`` (``event_type`` ``askhuman_post``), and a retry first looks
for that key in the thread (``conversations.replies``) or the channel
(``conversations.history``) and skips the post if an interrupted try already made it.
When the lookup itself fails (e.g. a missing ``*:history`` scope) the post goes out
anyway: a duplicate is better than a lost answer.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic import JsonValue
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.engine.ports import (
    DeliveryError,
    DeliveryRef,
    DeliveryTarget,
    Identity,
    Origin,
    PostKey,
)
from bot.platforms.slack.client import error_code
from bot.platforms.slack.errors import slack_words
from bot.platforms.slack.people import people
from bot.platforms.slack.runs import thread_root
from renderers.card import RequestCard
from renderers.markdown import slack_escape, truncate
from renderers.slack import read_edit_state, read_values, render_request, resolve_action
from renderers.tool_card import APPROVE_EDIT
from renderers.tool_edits import EDITED
from renderers.words import Said, verbatim

log = logging.getLogger(__name__)

PLATFORM = "slack"
MAX_RESULT_CHARS = 3900
POST_EVENT = "askhuman_post"
"""``metadata.event_type`` of every message askhuman posts for the engine."""
LOOKUP_PAGES = 5
"""At most this many pages (of 200 messages) are searched for an earlier try's post."""
CLOCK_SKEW = dt.timedelta(minutes=2)
"""Look this much further back than the post was queued (our clock vs Slack's)."""
SlackErrors = (SlackApiError, SlackClientError, OSError, TimeoutError)


def post_metadata(key: PostKey) -> dict[str, Any]:
    """The message metadata that lets a retry recognize this post."""
    return {"event_type": POST_EVENT,
            "event_payload": {"key": key.id, "run": key.run_id or "", "attempt": key.attempt}}


def is_post(message: dict[str, Any], key: PostKey) -> bool:
    metadata = message.get("metadata") or {}
    payload = metadata.get("event_payload") or {}
    return bool(metadata.get("event_type") == POST_EVENT and payload.get("key") == key.id)
MAX_EPHEMERAL_CHARS = 2900


class SlackAdapter:
    """Outbound Slack calls for the engine."""

    platform = PLATFORM

    def __init__(
        self, client: AsyncWebClient, *, on_change: Callable[[], None] | None = None,
        on_home_notice: Callable[[str, Said], Awaitable[object]] | None = None,
    ) -> None:
        self._client = client
        self._on_change = on_change
        self._on_home_notice = on_home_notice
        """Tells a person on their App Home (a click made there has no channel)."""
        """Called after a card was posted or updated, or a run result posted (App Home
        refreshes the people watching it; ``bot.platforms.slack.home``)."""

    def _changed(self) -> None:
        if self._on_change is not None:
            try:
                self._on_change()
            except Exception:  # Home is a convenience; never fail a delivery for it
                log.exception("app home refresh could not be scheduled",
                              extra={"platform": PLATFORM})

    async def deliver(
        self, card: RequestCard, target: DeliveryTarget, key: PostKey | None = None
    ) -> DeliveryRef:
        """Post the card to a channel, or to a user's DM (opened with conversations.open).

        On a retry, a card an interrupted try already posted is returned instead
        (``reused``), so the request never has two live cards in one place.
        """
        message = render_request(card)
        try:
            channel = target.id
            if target.kind == "user":
                opened = await self._client.conversations_open(users=target.id)
                channel = str((opened.get("channel") or {}).get("id") or "")
                if not channel:
                    raise DeliveryError(f"conversations.open gave no channel for {target.id}",
                                        reason="Slack could not open a direct message with "
                                        "that person.")
            earlier = await self._earlier_post(channel, None, key)
            if earlier is not None:
                log.info("slack card was already delivered by an earlier try",
                         extra={"platform": PLATFORM, "ref": card.ref, "channel": channel,
                                "message_ts": earlier})
                return DeliveryRef(PLATFORM, channel, earlier, reused=True)
            posted = await self._call(
                "chat.postMessage",
                channel=channel,
                text=message["text"],
                blocks=message["blocks"],
                unfurl_links=False,
                unfurl_media=False,
                **self._metadata(key),
            )
        except SlackErrors as exc:
            code = error_code(exc)
            log.warning(
                "slack delivery failed",
                extra={"platform": PLATFORM, "ref": card.ref, "target": target.id, "error": code},
            )
            raise DeliveryError(f"Slack could not deliver to {target.id}: {code}",
                                reason=slack_words(code), code=code) from exc
        ref = DeliveryRef(
            platform=PLATFORM, channel=str(posted["channel"]), message_id=str(posted["ts"])
        )
        self._changed()
        log.info(
            "slack card delivered",
            extra={
                "platform": PLATFORM,
                "ref": card.ref,
                "channel": ref.channel,
                "message_ts": ref.message_id,
            },
        )
        return ref

    async def update(self, card: RequestCard, ref: DeliveryRef) -> None:
        """Re-render the card in place for everyone (chat.update)."""
        message = render_request(card)
        try:
            await self._call(
                "chat.update",
                channel=ref.channel,
                ts=ref.message_id,
                text=message["text"],
                blocks=message["blocks"],
            )
        except SlackErrors as exc:
            log.warning(
                "slack card update failed",
                extra={
                    "platform": PLATFORM,
                    "ref": card.ref,
                    "channel": ref.channel,
                    "message_ts": ref.message_id,
                    "error": error_code(exc),
                },
            )
            return
        self._changed()
        log.info(
            "slack card updated",
            extra={
                "platform": PLATFORM,
                "ref": card.ref,
                "status": card.status,
                "message_ts": ref.message_id,
            },
        )

    async def post_run_result(
        self, origin: Origin, text: str, key: PostKey | None = None
    ) -> None:
        """Post a run's output (untrusted: escaped, truncated) in the thread it came from."""
        if not origin.channel:
            log.info("run result has no slack channel to go to", extra={"platform": PLATFORM})
            return
        try:
            await self._post_in_thread(origin.channel, origin.thread, text, "(empty output)",
                                       key)
            self._changed()
        except SlackErrors as exc:
            log.warning(
                "posting run result failed",
                extra={"platform": PLATFORM, "channel": origin.channel, "error": error_code(exc)},
            )

    async def open_thread(self, origin: Origin, starter: Identity, agent: str, prompt: str,
                          key: PostKey) -> Origin:
        """Post a slash command's "started" message; the run reports in its thread.

        On a retry (a restart after the ack) the message an interrupted try posted is
        found by its ``key`` and reused. Slack refusing (the bot is not in the channel)
        is ``DeliveryError``; a transport error is raised for a retry.
        """
        channel = origin.channel or ""
        earlier = await self._earlier_post(channel, None, key)
        if earlier is not None:
            return Origin(PLATFORM, channel, earlier)
        try:
            posted = await self._client.chat_postMessage(
                channel=channel, text=thread_root(starter.user_id, agent, prompt),
                unfurl_links=False, unfurl_media=False, **self._metadata(key))
        except SlackApiError as exc:
            code = error_code(exc)
            log.info("cannot post the run's thread root", extra={
                "platform": PLATFORM, "channel": channel, "error": code})
            reason = slack_words(code).removesuffix("; retrying.")  # nothing retries it
            raise DeliveryError(f"Slack refused the run's first message: {code}",
                                reason=reason, code=code) from exc
        return Origin(PLATFORM, str(posted["channel"]), str(posted["ts"]))

    async def remind(
        self, card: RequestCard, ref: DeliveryRef, text: str, key: PostKey | None = None
    ) -> None:
        """Post a reminder in the card's thread (escaped plain text, no mentions).

        What still fails after the client's retries is permanent: ``DeliveryError``.
        """
        try:
            await self._post_in_thread(
                ref.channel, ref.message_id, text, "Reminder: still waiting.", key
            )
        except SlackErrors as exc:
            code = error_code(exc)
            log.warning(
                "slack reminder failed",
                extra={"platform": PLATFORM, "ref": card.ref, "message_ts": ref.message_id,
                       "error": code},
            )
            raise DeliveryError(f"Slack refused the reminder: {code}",
                                reason=slack_words(code), code=code) from exc
        log.info(
            "slack reminder posted",
            extra={"platform": PLATFORM, "ref": card.ref, "message_ts": ref.message_id},
        )

    @staticmethod
    def read_click(
        card: RequestCard, action_id: str, values: Mapping[str, Any]
    ) -> tuple[str, dict[str, JsonValue]]:
        """A stored click's button token and raw ``state.values`` → ``(action id, values)``
        (the listener stores clicks before the ack, without reading the card)."""
        action = resolve_action(card.args, action_id)
        chosen = action.id if action is not None else action_id
        read = read_values(values, card)
        if chosen == APPROVE_EDIT and card.tool is not None and card.tool.editable:
            read[EDITED] = dict(read_edit_state(values, card))  # the edit modal's inputs
        return chosen, read

    async def tell_clicker(self, who: Identity, reply_to: Mapping[str, str],
                           words: Said) -> None:
        """Tell one person, ephemerally where they clicked and in their Slack locale, what
        became of a click the engine decided later (after a restart). Slack refusing
        (they left the channel, say) is logged, not retried; a transport error is raised
        for a retry."""
        channel = reply_to.get("channel")
        if not str(words):
            words = verbatim("Done.")
        if not channel and self._on_home_notice is not None:
            # A click on App Home: Home itself is where they are told.
            await self._on_home_notice(who.user_id, words)
            return
        if not channel:
            log.info("no channel to tell the clicker in", extra={"platform": PLATFORM})
            return
        text = words.text(await people(self._client).locale(who.user_id))
        try:
            await self._client.chat_postEphemeral(
                channel=channel, user=who.user_id,
                text=truncate(slack_escape(text), MAX_EPHEMERAL_CHARS) or "Done.")
        except SlackApiError as exc:
            log.warning("could not tell the clicker", extra={
                "platform": PLATFORM, "channel": channel, "error": error_code(exc)})

    async def _post_in_thread(
        self, channel: str, thread: str | None, text: str, if_empty: str,
        key: PostKey | None = None,
    ) -> None:
        """Post untrusted text as escaped, truncated plain text, with no link unfurls;
        skipped when a retry finds that an interrupted try already posted it."""
        earlier = await self._earlier_post(channel, thread, key)
        if earlier is not None:
            log.info("slack post was already made by an earlier try; not posting again",
                     extra={"platform": PLATFORM, "channel": channel, "message_ts": earlier})
            return
        await self._call(
            "chat.postMessage",
            channel=channel,
            thread_ts=thread,
            text=truncate(slack_escape(text), MAX_RESULT_CHARS) or if_empty,
            unfurl_links=False,
            unfurl_media=False,
            **self._metadata(key),
        )

    async def _call(self, method: str, **args: Any) -> AsyncSlackResponse:
        """``chat.postMessage`` / ``chat.update`` with a JSON body of ``args`` (None
        left out), through ``api_call``: what slack-sdk's ``chat_postMessage`` and
        ``chat_update`` send for these plain-dict arguments, without their pass over
        every block looking for Block Kit objects to convert (14 % of a call's
        instructions; ``benchmarks/README.md``). Errors, retries and metrics are the
        client's, as before."""
        body = {name: value for name, value in args.items() if value is not None}
        return await self._client.api_call(method, json=body)

    @staticmethod
    def _metadata(key: PostKey | None) -> dict[str, Any]:
        return {"metadata": post_metadata(key)} if key is not None else {}

    async def _earlier_post(
        self, channel: str, thread: str | None, key: PostKey | None
    ) -> str | None:
        """On a retry: the ts of the message an earlier try posted with ``key``, if any.

        Searches the thread (``conversations.replies``) or the channel
        (``conversations.history``) back to when the post was queued, with metadata.
        A failed lookup is logged and treated as "not found".
        """
        if key is None or not key.retry:
            return None
        oldest = f"{(key.since - CLOCK_SKEW).timestamp():.6f}" if key.since else None
        cursor: str | None = None
        try:
            for _page in range(LOOKUP_PAGES):
                args: dict[str, Any] = {"channel": channel, "include_all_metadata": True,
                                        "limit": 200, "oldest": oldest, "cursor": cursor}
                if thread:
                    page = await self._client.conversations_replies(ts=thread, **args)
                else:
                    page = await self._client.conversations_history(**args)
                for message in page.get("messages") or []:
                    if isinstance(message, dict) and is_post(message, key):
                        return str(message.get("ts"))
                cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
                if cursor is None:
                    return None
        except SlackErrors as exc:
            log.warning("could not look for an earlier try's post; posting (maybe again)",
                        extra={"platform": PLATFORM, "channel": channel,
                               "error": error_code(exc)})
        return None
