"""Text commands sent to the bot: ``<agent>: <prompt>`` starts a run, ``/pending``
lists open requests, ``delegate …`` manages delegations; anything else gets help."""

from __future__ import annotations

import logging
import re

from bot.engine.health import DATABASE_DOWN, database_unreachable
from bot.engine.ports import Origin
from bot.engine.results import EngineError
from bot.platforms.feishu.adapter import FeishuAdapter
from bot.platforms.feishu.delegate import delegate_command, delegate_rest
from bot.platforms.feishu.engine_api import EngineApi
from bot.platforms.feishu.handlers.replies import Replies
from bot.platforms.feishu.message import Incoming, message_text
from bot.platforms.feishu.pending import PENDING_PER_PAGE, pending_command, pending_reply
from renderers.i18n import CATALOG, say
from renderers.words import said

log = logging.getLogger("askhuman.feishu.events")

PLATFORM = "feishu"
_COMMAND = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9_.\-]{0,63})\s*[:：]\s*(.+)$", re.DOTALL)
HELP_TEXT = CATALOG["en"]["feishu.help"]


def help_text(agents: list[str], locale: str | None = None) -> str:
    """How to start a run, plus the agents the asker may start, in ``locale`` (Feishu
    tells a bot no one's language, so the routes' shared locale is used)."""
    more = (say(locale, "feishu.help_agents", agents=", ".join(agents)) if agents
            else say(locale, "feishu.help_none"))
    return f"{say(locale, 'feishu.help')} {more}"


class CommandListener:
    """Answers a text message addressed to the bot (a direct chat, or an @-mention)."""

    def __init__(self, engine: EngineApi, adapter: FeishuAdapter, replies: Replies) -> None:
        self._engine = engine
        self._adapter = adapter
        self._replies = replies

    async def command(self, msg: Incoming) -> None:
        text = message_text(msg)
        if text is None:
            return
        if msg.chat_type != "p2p" and not msg.mentions:
            return  # in groups we only act when @-mentioned
        if (wanted := pending_command(text)) is not None:
            await self._pending(msg, wanted)
            return
        if (rest := delegate_rest(text)) is not None:
            await self._replies.reply(msg.message_id, await delegate_command(
                self._engine, msg, rest, self._adapter.default_locale))
            return
        match = _COMMAND.match(text)
        if match is None:
            if msg.parent_id or msg.root_id:
                return  # chatter in a card's thread, not a command
            await self._replies.reply(msg.message_id, help_text(
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
            await self._replies.say(msg.message_id, exc.words)
        except Exception as exc:
            if database_unreachable(exc):
                log.warning("feishu run failed to start: database unreachable",
                            extra={"agent": agent, "error": type(exc).__name__})
                await self._replies.say(msg.message_id, DATABASE_DOWN)
                return
            log.exception("feishu run failed to start", extra={"agent": agent})
            await self._replies.say(msg.message_id, said("run.failed_logs"))

    async def _pending(self, msg: Incoming, number: int) -> None:
        """Reply with one page of the sender's open requests (never silence)."""
        try:
            page = await self._engine.pending_page(msg.sender, number, PENDING_PER_PAGE)
        except Exception as exc:
            down = database_unreachable(exc)
            log.warning("listing pending requests failed", exc_info=not down,
                        extra={"platform": PLATFORM, "error": type(exc).__name__})
            await self._replies.say(msg.message_id, DATABASE_DOWN if down else
                                    said("pending.failed_logs"))
            return
        await self._replies.reply(msg.message_id, pending_reply(page))
