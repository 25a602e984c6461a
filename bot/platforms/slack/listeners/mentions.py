"""``@askhuman <agent>: <prompt>`` in a channel starts a run in that message's thread.

Bolt acks an event as soon as its listener starts, so the start is checked and stored
by this listener's middleware (``before_ack``), which Bolt runs before that ack: a
crash right after the ack loses nothing (the engine's worker runs the stored start).
Retries of the same event are dropped by the dedupe middleware, so one mention starts
one run. Only the agent's ``starters`` may start it: anyone else gets an ephemeral
refusal (audited) and nothing is stored.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from bot.engine.ports import Origin
from bot.platforms.slack.directory import SlackDirectory
from bot.platforms.slack.engine_api import SlackEngine
from bot.platforms.slack.identity import from_event
from bot.platforms.slack.replies import tell
from bot.platforms.slack.runs import Admitted, admit, run_admitted
from bot.platforms.slack.text import strip_mentions

_AGENT_PROMPT = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*:?\s+(.+)$", re.DOTALL)
ADMITTED = "askhuman_start"
"""The key of the middleware's ``Admitted`` in Bolt's context."""

MENTION_HELP = (
    "Mention me with an agent and a prompt, e.g. `@askhuman deploy: ship v1.2 to staging`. "
    "`/askhuman help` lists everything I can do."
)


def parse_mention(text: str) -> tuple[str, str] | None:
    """``"<@UBOT> deploy: ship it"`` → ``("deploy", "ship it")``; None if malformed."""
    match = _AGENT_PROMPT.match(strip_mentions(text))
    if match is None:
        return None
    return match.group(1).rstrip(":"), match.group(2).strip()


def _where(event: dict[str, Any]) -> tuple[str, str, str]:
    channel = str(event.get("channel") or "")
    thread_ts = str(event.get("thread_ts") or event.get("ts") or "")
    return channel, thread_ts, str(event.get("user") or "")


class MentionListener:
    """Starts a run per mention; the mention's thread receives the run's output.

    Events carry only a user id, so the starter's display name (shown on cards and in
    the audit log) comes from ``users.info`` through the directory, when available.
    """

    def __init__(self, engine: SlackEngine, directory: SlackDirectory | None = None) -> None:
        self._engine = engine
        self._directory = directory

    async def before_ack(self, event: dict[str, Any], context: AsyncBoltContext,
                         next: Callable[[], Awaitable[None]]) -> None:
        """(listener middleware, before Bolt's ack) Check the starter, store the start."""
        arrived = time.monotonic()
        channel, thread_ts, user_id = _where(event)
        parsed = parse_mention(str(event.get("text") or ""))
        if channel and thread_ts and user_id and parsed is not None:
            agent, prompt = parsed
            name = await self._directory.display_name(user_id) if self._directory else None
            context[ADMITTED] = await admit(self._engine, agent, prompt,
                                            from_event(event, name),
                                            Origin("slack", channel, thread_ts), arrived)
        await next()

    async def __call__(self, event: dict[str, Any], client: AsyncWebClient,
                       context: AsyncBoltContext) -> None:
        channel, thread_ts, user_id = _where(event)
        if not channel or not thread_ts or not user_id:
            return
        admitted = context.get(ADMITTED)
        if not isinstance(admitted, Admitted):
            await client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=MENTION_HELP)
            return
        words = admitted.words
        if admitted.stored is not None:
            words = (await run_admitted(self._engine, admitted.stored)).words
        if words is not None:  # refused (audited), not recorded, or could not start
            await tell(client, user=user_id, channel=channel, text=words, thread_ts=thread_ts)
