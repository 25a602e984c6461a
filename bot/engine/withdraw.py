"""Withdraw: the person who started a run, or an admin, takes back its pending request.

The "Withdraw" item on a card's menu arrives as a click like any button (stored in
the click inbox before the ack, ``kind="withdraw"``), so an acknowledged withdrawal is
never lost. Unlike ``cancel`` (which approvers may use too), only the run's starter
and the ``admins:`` list may withdraw: anyone else is refused, audited, and the
request is left untouched. A withdrawal resolves the request ``cancelled`` in one
compare-and-set, with its audit row, resume job and the card update of every copy,
and closes the stored click in that same transaction.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from bot.askhuman.schema import cancelled_result
from bot.engine import inbox
from bot.engine.access import Authorizer
from bot.engine.committer import Committer
from bot.engine.context import EngineContext
from bot.engine.ports import Identity
from bot.engine.request_cards import Cards
from bot.engine.resolver import Resolver
from bot.engine.results import NOT_FOUND, RespondResult
from renderers.words import said

WITHDRAW_ACTION = "__withdraw"
"""The ``action_id`` a withdraw click carries in the click inbox."""
NOT_ALLOWED = said("refused.withdraw")


class Withdrawals:
    """``withdraw``: the starter or an admin cancels a pending request from the card."""

    def __init__(self, ctx: EngineContext, committer: Committer, cards: Cards,
                 authorizer: Authorizer, resolver: Resolver) -> None:
        self._ctx = ctx
        self._committer = committer
        self._cards = cards
        self._authorizer = authorizer
        self._resolver = resolver

    async def withdraw(self, ref: str, actor: Identity, reason: str = "",
                       mark: inbox.Mark | None = None) -> RespondResult:
        """Resolve ``ref`` ``cancelled`` if ``actor`` started its run or is an admin."""
        found = await self._committer.read(lambda s: self._cards.load(s, ref))
        if found is None:
            return await self._authorizer.refuse("not_found", NOT_FOUND, ref, actor,
                                                 "withdraw_unknown_ref", mark=mark)
        _request, run, card = found
        is_starter = (run.started_by_platform, run.started_by_user) == (
            actor.platform, actor.user_id)
        if not is_starter and not self._ctx.settings.admins.includes(actor.platform, actor.user_id):
            return await self._authorizer.refuse("rejected", NOT_ALLOWED, ref, actor,
                                                 "withdraw_unauthorized", card, run.id, mark=mark)
        who = actor.display_name or actor.user_id
        words = said("withdraw.done_reason", who=who, reason=reason) if reason else \
            said("withdraw.done", who=who)
        result = cancelled_result(str(words))  # the agent reads it in English

        def resolve(session: Session) -> RespondResult:
            answer = self._resolver.resolve_in(session, ref, result, "withdrawn", actor, words)
            if mark is not None:
                inbox.finish(session, mark, self._ctx.now(), answer.outcome, answer.words)
            return answer

        answer = await self._committer.tx(resolve)
        return RespondResult(answer.outcome, answer.words, await self._cards.card(ref))
