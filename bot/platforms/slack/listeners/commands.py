"""``/askhuman run | pending | grants | delegate | help``.

Every branch acks within Slack's 3 s: usage errors answer in the ack itself;
``pending``, ``grants`` and ``help`` ack empty and then do their (slower) work,
replying through the Web API or the command's ``response_url``. ``run`` first asks the
engine whether the person is one of the agent's ``starters`` (a refusal is told to them
alone and nothing is posted), then stores the start before the ack
(``bot.platforms.slack.runs``) and runs it after: its "started" message (the run's
thread) is posted by ``SlackAdapter.open_thread``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncRespond
from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from bot.engine.health import DATABASE_DOWN, database_unreachable
from bot.engine.ports import Identity, Origin
from bot.engine.start_rows import Start
from bot.platforms.slack.delegate import delegate_command
from bot.platforms.slack.engine_api import SlackEngine
from bot.platforms.slack.grants import grants_reply
from bot.platforms.slack.identity import from_command
from bot.platforms.slack.pending_list import list_message, pending_text
from bot.platforms.slack.people import in_their_words, people
from bot.platforms.slack.replies import safe_text
from bot.platforms.slack.runs import Admitted, admit, run_admitted
from renderers import i18n
from renderers.batch import MAX_ITEMS
from renderers.markdown import slack_escape
from renderers.words import said

log = logging.getLogger(__name__)

HELP = """*askhuman* lets AI agents ask people for approvals.
• `/askhuman run <agent> <prompt>` — start a run; its final answer appears here, in a thread.
• `@askhuman <agent>: <prompt>` — the same, by mentioning me in a channel I'm in.
• `/askhuman pending [page]` — the open requests you may answer; tick several to approve \
or reject them at once.
• `/askhuman grants` — the standing grants you may revoke.
• `/askhuman delegate @someone until 2026-12-24` — out of office: they answer for you \
(`delegate revoke`, `delegate list`).
• `/askhuman help` — this message."""

RUN_USAGE = (
    "Usage: `/askhuman run <agent> <prompt>`, e.g. `/askhuman run deploy ship v1.2 to staging`."
)
PENDING_PER_PAGE = MAX_ITEMS
PENDING_FAILED = said("pending.failed")
ADMITTED = "askhuman_run_start"
"""Where ``before_ack`` leaves the checked start (an ``Admitted``) for the listener."""


def help_text(agents: list[str], locale: str | None = None) -> str:
    """The help plus the agents the asker may start (agent names are admin config), in
    ``locale`` (``renderers.i18n``; ``HELP`` is the English text)."""
    with i18n.speaking(locale):
        if not agents:
            return f"{i18n.t('help.slack')}\n{i18n.t('help.no_agents')}"
        names = ", ".join(f"`{slack_escape(name)}`" for name in agents)
        return f"{i18n.t('help.slack')}\n" + i18n.t("help.agents", names=names)


def parse(text: str) -> tuple[str, str]:
    """Split ``"run deploy ship it"`` into ``("run", "deploy ship it")``."""
    head, _, rest = text.strip().partition(" ")
    return head.lower(), rest.strip()


def _run_start(command: dict[str, Any]) -> Start | None:
    """The start a ``/askhuman run <agent> <prompt>`` asks for (None: not a well-formed
    ``run``, which the listener answers with help or usage)."""
    sub, rest = parse(str(command.get("text") or ""))
    agent, _, prompt = rest.partition(" ")
    if sub != "run" or not agent or not prompt.strip():
        return None
    origin = Origin("slack", str(command.get("channel_id") or ""))
    return Start(agent, prompt.strip(), from_command(command), origin)


def page_number(text: str) -> int:
    """``/askhuman pending 3`` → 3; anything else → the first page."""
    head = text.split(maxsplit=1)[0] if text.strip() else ""
    return int(head) if head.isdigit() and 0 < len(head) <= 6 else 1


class CommandListener:
    """One listener for the slash command; sub-commands are small methods."""

    def __init__(self, engine: SlackEngine) -> None:
        self._engine = engine

    async def before_ack(self, command: dict[str, Any], context: AsyncBoltContext,
                         next: Callable[[], Awaitable[None]]) -> None:
        """(listener middleware, before Bolt's ack clock) Check and store a ``run``.

        Bolt answers 404 "unhandled request" when a listener has not acked 3 s after
        it started it; the start's store has a budget of its own (``admit``), and
        under load the two together could pass that clock, so a stored start was
        answered 404. Here the clock has not started yet.
        """
        start = _run_start(command)
        if start is not None:
            context[ADMITTED] = await admit(self._engine, start.agent, start.prompt,
                                            start.started_by, start.origin, time.monotonic())
        await next()

    async def __call__(
        self,
        ack: AsyncAck,
        command: dict[str, Any],
        client: AsyncWebClient,
        respond: AsyncRespond,
        context: AsyncBoltContext,
    ) -> None:
        sub, rest = parse(str(command.get("text") or ""))
        user = from_command(command)
        if sub == "run":
            admitted = context.get(ADMITTED)
            if not isinstance(admitted, Admitted):
                await ack(text=RUN_USAGE, response_type="ephemeral")
                return
            await self._start(ack, client, respond, user, admitted)
        elif sub == "pending":
            await ack()
            locale, zone = await people(client).person(user.user_id)
            await self._pending(respond, user, page_number(rest), locale, zone)
        elif sub == "grants":
            await ack()
            locale, zone = await people(client).person(user.user_id)
            listed = await grants_reply(self._engine, user, locale, zone)
            await respond(**listed, response_type="ephemeral")
        elif sub == "delegate":
            await ack()
            directory = self._engine.directory(user.platform)
            reply = await delegate_command(self._engine, user, rest, directory)
            words = await in_their_words(client, user.user_id, reply)
            await respond(text=safe_text(words), response_type="ephemeral")
        else:
            # Help lists only the agents this person may start (directory lookups), so it
            # is sent after the ack rather than in it.
            await ack()
            locale = await people(client).locale(user.user_id)
            with i18n.speaking(locale):
                lead = "" if sub in ("", "help") else i18n.t(
                    "help.unknown", sub=slack_escape(sub[:40])) + "\n\n"
            agents = await self._engine.startable_agents(user)
            await respond(text=lead + help_text(agents, locale), response_type="ephemeral")

    async def _start(self, ack: AsyncAck, client: AsyncWebClient, respond: AsyncRespond,
                     user: Identity, admitted: Admitted) -> None:
        """Stored before the ack (``before_ack``; Slack never resends an acknowledged
        command), run after."""
        await ack()
        words = admitted.words
        if admitted.stored is not None:
            words = (await run_admitted(self._engine, admitted.stored)).words
        if words is not None:  # refused, not recorded, or could not start: them alone
            shown = await in_their_words(client, user.user_id, words)
            await respond(text=safe_text(shown), response_type="ephemeral")

    async def _pending(self, respond: AsyncRespond, user: Identity, number: int,
                       locale: str | None = None, zone: str | None = None) -> None:
        """List one page of the asker's open requests; when that fails, say so (never
        silence)."""
        try:
            page = await self._engine.pending_page(user, number, PENDING_PER_PAGE)
        except Exception as exc:
            down = database_unreachable(exc)
            log.warning("listing pending requests failed", exc_info=not down,
                        extra={"platform": "slack", "error": type(exc).__name__})
            text = DATABASE_DOWN if down else PENDING_FAILED
            await respond(text=text.text(locale), response_type="ephemeral")
            return
        await respond(response_type="ephemeral",
                      **list_message(page, pending_text(page, locale, zone), locale, zone))
