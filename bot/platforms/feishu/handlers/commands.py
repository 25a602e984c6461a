"""Text commands sent to the bot: ``<agent>: <prompt>`` starts a run, ``/pending``
lists open requests, ``grants`` the standing grants the sender may revoke
(``bot.platforms.feishu.grants``), ``delegate …`` manages delegations; anything else
gets help.

A run start is checked (a refusal is replied at once, nothing stored), stored in the
engine's run-start inbox, and only then may the message be acknowledged (Feishu never
re-pushes a message it got its 200 for); the run then runs from the stored row, and
after a crash the engine's worker runs it."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from bot.engine.health import DATABASE_DOWN, database_unreachable
from bot.engine.ports import Origin
from bot.engine.start_rows import Start
from bot.platforms.feishu.adapter import FeishuAdapter
from bot.platforms.feishu.delegate import delegate_command, delegate_rest
from bot.platforms.feishu.engine_api import EngineApi
from bot.platforms.feishu.grants import GrantLists, grants_command
from bot.platforms.feishu.handlers.batch import BatchClicks
from bot.platforms.feishu.handlers.replies import Replies
from bot.platforms.feishu.message import Incoming, message_text
from bot.platforms.feishu.pending import PENDING_PER_PAGE, pending_command, pending_reply
from renderers.i18n import CATALOG, say
from renderers.words import Said, said

log = logging.getLogger("askhuman.feishu.events")

PLATFORM = "feishu"
_COMMAND = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9_.\-]{0,63})\s*[:：]\s*(.+)$", re.DOTALL)
HELP_TEXT = CATALOG["en"]["feishu.help"]
Gate = Callable[[], None]
"""Called once a message's run start is stored (or it starts none): it may be acked."""


def help_text(agents: list[str], locale: str | None = None) -> str:
    """How to start a run, plus the agents the asker may start, in ``locale`` (Feishu
    tells a bot no one's language, so the routes' shared locale is used)."""
    more = (say(locale, "feishu.help_agents", agents=", ".join(agents)) if agents
            else say(locale, "feishu.help_none"))
    return f"{say(locale, 'feishu.help')} {more}"


class CommandListener:
    """Answers a text message addressed to the bot (a direct chat, or an @-mention)."""

    def __init__(self, engine: EngineApi, adapter: FeishuAdapter, replies: Replies,
                 grants: GrantLists | None = None,
                 batches: BatchClicks | None = None) -> None:
        self._engine = engine
        self._adapter = adapter
        self._replies = replies
        self._grants = grants
        self._batches = batches

    async def command(self, msg: Incoming, stored: Gate = lambda: None) -> None:
        """``stored()`` is called once a run start is durable, or once the message is
        known to start none: the transport acks the message only then."""
        if not self._starts_a_run(msg):
            stored()
        text = message_text(msg)
        if text is None:
            return
        if msg.chat_type != "p2p" and not msg.mentions:
            return  # in groups we only act when @-mentioned
        if (wanted := pending_command(text)) is not None:
            await self._pending(msg, wanted)
            return
        if grants_command(text) and self._grants is not None:
            words = await self._grants.send(msg)
            if words is not None:
                await self._replies.say(msg.message_id, words)
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
        words = await self._start(Start(agent, prompt, msg.sender, origin), stored)
        if words is not None:  # refused (audited), not recorded, or could not start
            await self._replies.say(msg.message_id, words)

    async def _start(self, start: Start, stored: Gate) -> Said | None:
        """Check the starter, store the start, open the gate (Feishu may now have its
        200: the start is durable), then run it; the words to reply when it did not."""
        try:
            refusal = await self._engine.start_refusal(start.agent, start.started_by)
            if refusal is not None:
                return refusal
            recorded = await self._engine.record_start(start)
        except Exception as exc:
            if database_unreachable(exc):
                log.warning("feishu run failed to start: database unreachable",
                            extra={"agent": start.agent, "error": type(exc).__name__})
                return DATABASE_DOWN
            log.exception("feishu run failed to start", extra={"agent": start.agent})
            return said("run.failed_logs")
        finally:
            stored()
        if recorded is None:
            return said("start.not_recorded", agent=start.agent[:64])
        return (await self._engine.run_start(recorded)).words

    @staticmethod
    def _starts_a_run(msg: Incoming) -> bool:
        text = message_text(msg)
        return (text is not None and (msg.chat_type == "p2p" or bool(msg.mentions))
                and pending_command(text) is None and delegate_rest(text) is None
                and _COMMAND.match(text) is not None)

    async def _pending(self, msg: Incoming, number: int) -> None:
        """Reply with one page of the sender's open requests (never silence): the list
        card with checkboxes (``handlers.batch``) when there is something to list."""
        try:
            page = await self._engine.pending_page(msg.sender, number, PENDING_PER_PAGE)
            if page.total and self._batches is not None:
                card = await self._batches.list_card(msg.sender, page.page)
                await self._replies.card(msg.message_id, card)
                return
        except Exception as exc:
            down = database_unreachable(exc)
            log.warning("listing pending requests failed", exc_info=not down,
                        extra={"platform": PLATFORM, "error": type(exc).__name__})
            await self._replies.say(msg.message_id, DATABASE_DOWN if down else
                                    said("pending.failed_logs"))
            return
        await self._replies.reply(msg.message_id, pending_reply(page))
