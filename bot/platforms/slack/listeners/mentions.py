"""``@askhuman <agent>: <prompt>`` in a channel starts a run in that message's thread.

Events are acked by Bolt before this runs; retries of the same event are dropped by
the dedupe middleware, so one mention starts one run. Only the agent's ``starters`` may
start it: anyone else gets an ephemeral refusal (audited) and nothing runs.
"""

from __future__ import annotations

import re
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.platforms.slack.directory import SlackDirectory
from bot.platforms.slack.engine_api import SlackEngine
from bot.platforms.slack.identity import from_event
from bot.platforms.slack.replies import tell
from bot.platforms.slack.runs import start_run
from bot.platforms.slack.text import strip_mentions

_AGENT_PROMPT = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*:?\s+(.+)$", re.DOTALL)

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


class MentionListener:
    """Starts a run per mention; the mention's thread receives the run's output.

    Events carry only a user id, so the starter's display name (shown on cards and in
    the audit log) comes from ``users.info`` through the directory, when available.
    """

    def __init__(self, engine: SlackEngine, directory: SlackDirectory | None = None) -> None:
        self._engine = engine
        self._directory = directory

    async def __call__(self, event: dict[str, Any], client: AsyncWebClient) -> None:
        channel = str(event.get("channel") or "")
        thread_ts = str(event.get("thread_ts") or event.get("ts") or "")
        user_id = event.get("user")
        if not channel or not thread_ts or not user_id:
            return
        parsed = parse_mention(str(event.get("text") or ""))
        if parsed is None:
            await client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=MENTION_HELP)
            return
        agent, prompt = parsed
        name = await self._directory.display_name(str(user_id)) if self._directory else None
        user = from_event(event, name)
        refusal = await self._engine.start_refusal(agent, user)
        if refusal is not None:  # audited by the engine; only the author sees why
            await tell(client, user=user.user_id, channel=channel, text=refusal,
                       thread_ts=thread_ts)
            return
        await start_run(
            self._engine,
            client,
            agent=agent,
            prompt=prompt,
            user=user,
            channel=channel,
            thread_ts=thread_ts,
        )
