"""Attachments: files a person adds to a file field before submitting the form.

Feishu cards have no file component, so a person replies in the card's thread with
files; they are staged here (authorized like a click, checked against the field's
limits) and used when that person submits without that field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from bot.engine import inbox, store
from bot.engine.access import Allowed, Authorizer
from bot.engine.committer import Committer
from bot.engine.context import EngineContext
from bot.engine.decisions import closed
from bot.engine.ports import Identity
from bot.engine.results import RespondResult
from bot.engine.values import FILE_KEYS, InvalidValues, check_values, quoted
from renderers.words import joined, said
from storage import StagedFile


class Attachments:
    """``attach_files`` / ``attach``: stage file references per field and person."""

    def __init__(self, ctx: EngineContext, committer: Committer,
                 authorizer: Authorizer) -> None:
        self._ctx = ctx
        self._committer = committer
        self._authorizer = authorizer

    async def attach_files(
        self, ref: str, responder: Identity, field_name: str, files: Sequence[Mapping[str, Any]]
    ) -> RespondResult:
        """Stage file references for a file field until the person submits the form."""
        return await self.attach(ref, responder, {field_name: list(files)}, None)

    async def attach(
        self, ref: str, responder: Identity, wanted: Mapping[str, Any],
        mark: inbox.Mark | None,
    ) -> RespondResult:
        """Stage files for one or more file fields in one transaction (all or none);
        ``wanted`` maps field names to lists of file references."""
        checked = await self._authorizer.authorize(ref, responder, "attach", mark)
        if not isinstance(checked, Allowed):
            return checked
        request, card, staged = checked.request, checked.card, checked.staged
        batch: list[tuple[str, str, list[dict[str, Any]]]] = []
        try:
            for field_name, files in wanted.items():
                field = next((f for f in card.args.fields if f.name == field_name), None)
                if field is None or field.type not in ("file", "file-list"):
                    raise InvalidValues(said("value.no_file_field", field=quoted(field_name)))
                if not isinstance(files, list) or not all(isinstance(f, Mapping) for f in files):
                    raise InvalidValues(said("value.unreadable_files",
                                             label=quoted(field.label)))
                cleaned = [{k: f.get(k) for k in FILE_KEYS} for f in files]
                combined = staged.get(field_name, []) + cleaned
                check_values(card.args.model_copy(update={"fields": [field]}),
                             {field_name: combined})
                batch.append((field_name, field.label, cleaned))
        except InvalidValues as exc:
            return await self._authorizer.refuse("rejected", exc.words, ref, responder,
                                                 "attach_invalid", card, request.run_id, mark=mark)
        now = self._ctx.now()
        message = said("files.attached", items=joined(
            (said("files.attached_to", count=len(cleaned), label=quoted(label))
             for _, label, cleaned in batch), "list.semicolon"))

        def stage(session: Session) -> None:
            for field_name, _label, cleaned in batch:
                session.add(StagedFile(request_id=request.id, platform=responder.platform,
                                       user_id=responder.user_id, field_name=field_name,
                                       files=cleaned, created_at=now))
                store.audit(session, now, "files_attached", run_id=request.run_id, ref=ref,
                            actor=responder,
                            details={"field": field_name, "count": len(cleaned)})
            closed(session, now, mark, RespondResult("recorded", message))

        await self._committer.tx(stage)
        return RespondResult("recorded", message, card)

