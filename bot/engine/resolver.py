"""System outcomes of a request (timeout, cancel, unavailable, an answer given elsewhere).

One compare-and-set, in the caller's transaction or its own: the row is locked,
re-checked as pending, resolved with its audit row, and the resume job and the card
update of every copy are queued with it. A request already decided is left as it is
(audited ``<event>_too_late``).
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from bot.askhuman.schema import AskHumanToolResult
from bot.engine import store, waiting
from bot.engine.cards import already_decided_message
from bot.engine.committer import Committer, log
from bot.engine.context import EngineContext
from bot.engine.ports import Identity
from bot.engine.request_cards import Cards
from bot.engine.results import NOT_FOUND, RespondResult
from renderers.words import Said, verbatim


class Resolver:
    """Settle pending requests on the system's behalf, exactly once."""

    def __init__(self, ctx: EngineContext, committer: Committer, cards: Cards) -> None:
        self._ctx = ctx
        self._committer = committer
        self._cards = cards

    async def resolve(
        self, ref: str, result: AskHumanToolResult, event: str, actor: Identity | None = None,
        words: Said | None = None,
    ) -> RespondResult:
        """Compare-and-set a non-human outcome (timeout, cancel, unavailable)."""
        answer = await self._committer.tx(
            lambda s: self.resolve_in(s, ref, result, event, actor, words))
        return RespondResult(answer.outcome, answer.words, await self._cards.card(ref))

    def resolve_in(
        self, session: Session, ref: str, result: AskHumanToolResult, event: str,
        actor: Identity | None = None, words: Said | None = None,
    ) -> RespondResult:
        """The compare-and-set itself, inside the caller's transaction (queues the resume
        and the card update with it). ``words`` tell the actor it worked (default: the
        result's message, as it is)."""
        now = self._ctx.now()
        request = store.get_request(session, ref, lock=self._ctx.db.is_postgres)
        if request is None:
            return RespondResult("not_found", NOT_FOUND)
        if not store.resolve(session, now, request, result, actor):
            message = already_decided_message(request)
            store.audit(session, now, f"{event}_too_late", outcome="refused",
                        run_id=request.run_id, ref=ref, actor=actor, reason=str(message))
            return RespondResult("already_decided", message)
        store.audit(session, now, event, run_id=request.run_id, ref=ref, actor=actor,
                    reason=result.message)
        if result.status == "timeout":
            waiting.queue_timeout_notices(self._ctx, session, [request.id], now=now)
        self._cards.enqueue_update(session, request)
        log.info("request resolved", extra={"ref": ref, "status": result.status})
        return RespondResult("accepted", words or verbatim(result.message or event))


