"""Starting a run from Slack (slash command or mention) and reporting start failures.

The run itself may take minutes (a model call), so this always runs after the
ack. Its final output arrives later through ``SlackAdapter.post_run_result``; only
failures to *start* are reported here, in the same thread.
"""

from __future__ import annotations

import logging

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.agents.base import AgentRuntimeError
from bot.engine.health import DATABASE_DOWN, database_unreachable
from bot.engine.ports import Identity, Origin
from bot.engine.results import EngineError
from bot.platforms.slack.client import error_code
from bot.platforms.slack.engine_api import SlackEngine
from renderers.markdown import slack_escape

log = logging.getLogger(__name__)


async def start_run(
    engine: SlackEngine,
    client: AsyncWebClient,
    *,
    agent: str,
    prompt: str,
    user: Identity,
    channel: str,
    thread_ts: str,
) -> str | None:
    """Start ``agent``; return the run id, or None after explaining the failure in thread."""
    origin = Origin(platform="slack", channel=channel, thread=thread_ts)
    try:
        run_id = await engine.start_run(agent, prompt, user, origin)
    except (EngineError, AgentRuntimeError) as exc:
        await _say(client, channel, thread_ts, f":warning: {slack_escape(str(exc))}")
        return None
    except Exception as exc:
        if database_unreachable(exc):
            log.warning("starting a run failed: database unreachable",
                        extra={"platform": "slack", "agent": agent,
                               "error": type(exc).__name__})
            await _say(client, channel, thread_ts, f":warning: {DATABASE_DOWN}")
            return None
        log.exception("starting a run failed", extra={"platform": "slack", "agent": agent})
        await _say(client, channel, thread_ts, ":warning: The run could not start (see the logs).")
        return None
    log.info(
        "run started from slack",
        extra={"platform": "slack", "agent": agent, "run": run_id, "user": user.user_id},
    )
    return run_id


async def _say(client: AsyncWebClient, channel: str, thread_ts: str, text: str) -> None:
    try:
        await client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=text)
    except (SlackApiError, SlackClientError, OSError, TimeoutError) as exc:
        log.warning(
            "could not report a start failure",
            extra={"platform": "slack", "channel": channel, "error": error_code(exc)},
        )
