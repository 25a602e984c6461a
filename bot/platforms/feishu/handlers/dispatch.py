"""``FeishuEventHandlers``: the Feishu listeners built once, wired to each other and to
an SDK dispatcher. Each listener gets what it uses, nothing more; this class only
assembles them and owns the loop they share."""

from __future__ import annotations

import asyncio
from typing import Any

import lark_oapi as lark

from bot.platforms.feishu.adapter import FeishuAdapter
from bot.platforms.feishu.client import FeishuApi
from bot.platforms.feishu.engine_api import EngineApi
from bot.platforms.feishu.grants import GrantLists
from bot.platforms.feishu.handlers.admission import ClickAdmission
from bot.platforms.feishu.handlers.audit import Auditor
from bot.platforms.feishu.handlers.batch import BatchClicks
from bot.platforms.feishu.handlers.click_store import ClickStore
from bot.platforms.feishu.handlers.clicks import ClickListener
from bot.platforms.feishu.handlers.commands import CommandListener
from bot.platforms.feishu.handlers.decisions import AnswersFirst, ClickDecider
from bot.platforms.feishu.handlers.dedupe import SharedDedupe
from bot.platforms.feishu.handlers.files import FileListener
from bot.platforms.feishu.handlers.grant_clicks import GrantClicks
from bot.platforms.feishu.handlers.loop import MainLoop
from bot.platforms.feishu.handlers.messages import MessageListener
from bot.platforms.feishu.handlers.replies import Replies
from bot.platforms.feishu.names import NameCache
from bot.platforms.feishu.replay import ReplayGuard


class FeishuEventHandlers:
    """Translate card clicks and messages into engine calls.

    - ``clicks``: ``on_card_action`` (long connection) and ``answer_click`` (HTTP).
    - ``messages``: ``on_message`` (both transports), then commands or files.
    - ``decisions``: deciding stored clicks after the burst, telling the clicker.
    - ``dedupe`` / ``auditor``: shared dedupe and refusal audit, also used by the
      HTTP endpoint.
    """

    def __init__(
        self,
        engine: EngineApi,
        adapter: FeishuAdapter,
        api: FeishuApi,
        guard: ReplayGuard,
        *,
        reply_budget: float = 2.5,
        ws_release_delay: float = 0.3,
        names: NameCache | None = None,
    ) -> None:
        self.loop = MainLoop()
        self.dedupe = SharedDedupe(engine)
        self.auditor = Auditor(engine, self.loop)
        replies = Replies(api, names, reply_budget, adapter.default_locale)
        self.answers = answers = AnswersFirst()
        """Clicks being answered right now (a burst skips the pre-check)."""
        self.decisions = ClickDecider(engine, adapter, answers, replies.humanize_words,
                                      self.loop, names)
        store = ClickStore(engine, self.dedupe, self.auditor, answers, self.decisions,
                           replies.humanize_now)
        lists = GrantLists(engine, api, adapter.default_locale)
        grants = GrantClicks(engine, adapter, lists, guard, self.dedupe, self.auditor,
                             self.loop)
        self.batches = BatchClicks(engine, adapter, api, guard, self.loop,
                                   reply_budget=reply_budget,
                                   humanize_now=replies.humanize_now,
                                   humanize=replies.humanize_words)
        self.clicks = ClickListener(
            ClickAdmission(guard, adapter, self.auditor), store, adapter, self.loop,
            reply_budget=reply_budget, ws_release_delay=ws_release_delay, grants=grants,
            batches=self.batches)
        self.messages = MessageListener(
            guard, self.loop, self.dedupe, self.auditor,
            CommandListener(engine, adapter, replies, lists, self.batches),
            FileListener(engine, replies))

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The application's loop: engine calls and adapter holds run there."""
        self.loop.bind(loop)

    def dispatcher(self, encrypt_key: str, verification_token: str) -> Any:
        """An SDK dispatcher wired to these handlers (keys unused on the WS path)."""
        return (
            lark.EventDispatcherHandler.builder(encrypt_key, verification_token)
            .register_p2_card_action_trigger(self.clicks.on_card_action)
            .register_p2_im_message_receive_v1(self.messages.on_message)
            .build()
        )

    async def drain(self, timeout: float = 10.0) -> None:
        """Wait (on the main loop) until scheduled message handling and click decisions
        have finished."""
        await self.loop.drain(timeout)
