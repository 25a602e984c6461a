"""Files sent as a reply to a request card: attached to the request's file field."""

from __future__ import annotations

import logging

from bot.platforms.feishu.engine_api import EngineApi
from bot.platforms.feishu.handlers.replies import Replies
from bot.platforms.feishu.message import Incoming, file_reference
from renderers.words import said

log = logging.getLogger("askhuman.feishu.events")

PLATFORM = "feishu"
FILE_MESSAGE_TYPES = ("file", "image", "media", "audio")


class FileListener:
    """Attaches a file replying to one of our cards (in its thread) to that request."""

    def __init__(self, engine: EngineApi, replies: Replies) -> None:
        self._engine = engine
        self._replies = replies

    async def attach(self, msg: Incoming) -> None:
        ref = None
        for anchor in (msg.parent_id, msg.root_id):
            if anchor:
                ref = await self._engine.find_by_message(PLATFORM, anchor)
                if ref:
                    break
        if ref is None:
            return  # a file that does not answer one of our cards
        card = await self._engine.card(ref)
        fields = card.args.fields if card else []
        file_fields = [f for f in fields if f.type in ("file", "file-list")]
        if not file_fields:
            await self._replies.say(msg.message_id, said("files.not_asked"),
                                    card.locale if card else None)
            return
        file_ref = file_reference(msg)
        if file_ref is None:
            return
        result = await self._engine.attach_files(ref, msg.sender, file_fields[0].name, [file_ref])
        log.info(
            "feishu file reply",
            extra={"ref": ref, "user": msg.sender.user_id, "outcome": result.outcome},
        )
        await self._replies.say(msg.message_id, await self._replies.humanize_words(result.words),
                                card.locale if card else None)
