"""Decisions: the compare-and-set that settles a request, by a person or the system.

People answer (``respond``) or withdraw a request
(``cancel``) after the ``Authorizer`` has checked they may; the system settles it when
it times out (``expire_due``) or cannot be delivered (``Resolver``, from the outbox).
The write locks the row, re-checks it is still pending and commits the vote or
decision together with its audit row, resume job and card update, so concurrent
clicks on several copies, replicas or platforms decide exactly once.

The deadline is part of that compare-and-set: an answer received at or after it is
refused ("This request timed out at …") and, if the sweep has not got there yet, the
same transaction resolves the request as ``timeout``. "Received" is when the click
was stored in the inbox (``bot.engine.inbox``), so a click recorded before the
deadline still counts, and the timeout sweep waits for such clicks to be decided.
A click decided from the inbox closes its row in the decision's own transaction.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from pydantic import JsonValue
from sqlalchemy.orm import Session

from bot import metrics
from bot.askhuman.schema import (
    AskHumanSelectedAction,
    AskHumanToolResult,
    cancelled_result,
    timeout_result,
)
from bot.engine import authz, expiry, grant_hook, inbox, policy, queued, store, waiting
from bot.engine.access import Allowed, Authorizer, Copies, copies_on
from bot.engine.card_rows import CardRow
from bot.engine.cards import already_decided_message, as_utc
from bot.engine.committer import Committer, log
from bot.engine.context import EngineContext
from bot.engine.edits import apply_edit, edited_since, take_edit
from bot.engine.ports import DirectoryUnavailable, Identity
from bot.engine.request_cards import Cards
from bot.engine.resolver import Resolver
from bot.engine.results import NOT_FOUND, RespondResult
from bot.engine.resumes import ResumeWorker, Slot
from bot.engine.values import InvalidValues, check_answer, quoted
from bot.tools.approval import APPROVE_FAMILY
from renderers.card import RequestCard
from renderers.tool_edits import EDITED
from renderers.words import Said, platform_name, said
from storage import HumanRequest, Run

ClickReader = Callable[[RequestCard, str, Mapping[str, Any]], tuple[str, dict[str, JsonValue]]]
"""A platform's ``read_click``: its raw click values → (action id, contract values)."""

TOOL_APPROVAL = "tool_approval"
"""``human_requests.kind`` of a tool call's approval (``bot.engine.approvals``)."""

SYSTEM = Identity("system", "askhuman", "askhuman")
"""The actor of system resolutions; may always cancel."""


class Decider:
    """Answers, cancellation and timeouts of pending requests: the compare-and-set."""

    def __init__(self, ctx: EngineContext, committer: Committer, authorizer: Authorizer,
                 cards: Cards, resolver: Resolver, resumes: ResumeWorker | None = None
                 ) -> None:
        self._ctx = ctx
        self._committer = committer
        self._authorizer = authorizer
        self._cards = cards
        self._resolver = resolver
        self._resumes = resumes
        """Where a decision claims its resume when a slot is free (``_decide_claiming``)."""

    async def respond(
        self, ref: str, responder: Identity, action_id: str, values: Mapping[str, JsonValue]
    ) -> RespondResult:
        """A person answered: authorize, validate, then compare-and-set the decision."""
        return await self.respond_stored(ref, responder, action_id, values, None)

    async def respond_stored(
        self, ref: str, responder: Identity, action_id: str, values: Mapping[str, JsonValue],
        mark: inbox.Mark | None, read: ClickReader | None = None, *, show: bool = True,
    ) -> RespondResult:
        """``respond`` for a click stored in the inbox (``mark``) or a direct call (None:
        received now). Every outcome closes the stored click in its own transaction.

        ``read(card, action_id, values)`` turns values as the platform sent them into
        ``(action id, contract values)`` once the card is loaded (a Slack click is
        stored before the ack with its raw ``state.values``).

        ``show=False`` leaves the card out of the result (a stored click: the platform
        shows the updated card through the outbox, so reading it again here only costs
        a snapshot read per click)."""
        received = mark.received_at if mark is not None else self._ctx.now()
        checked = await self._authorizer.authorize(ref, responder, "respond", mark)
        if not isinstance(checked, Allowed):
            return checked
        request, card, staged = checked.request, checked.card, checked.staged
        run_id = request.run_id
        responder = checked.acting  # a delegate acts as the delegator
        if _late(request, received):  # refuse before judging values it no longer needs
            answer = await self._committer.tx(
                lambda s: self._late_in(s, ref, responder, received, mark))
            return RespondResult(answer.outcome, answer.words,
                                 await self._cards.card(ref) if show else None)
        if read is not None:
            try:
                action_id, values = read(card, action_id, values)
            except InvalidValues as exc:  # the reader's own words (a batch click)
                return await self._authorizer.refuse(
                    "rejected", exc.words, ref, responder, "respond_invalid", card, run_id,
                    {"action_id": action_id[:200]}, mark=mark)
            except ValueError as exc:
                return await self._authorizer.refuse(
                    "rejected", said("refused.unreadable", reason=str(exc)), ref, responder,
                    "respond_invalid", card, run_id, {"action_id": action_id[:200]}, mark=mark)
        args = card.args
        merged: dict[str, Any] = dict(values)
        for name, files in staged.items():
            if not merged.get(name):
                merged[name] = files
        try:
            merged, edit = take_edit(card, action_id, merged)
            action, clean = check_answer(args, action_id, merged)
            if edit:
                clean[EDITED] = edit
        except InvalidValues as exc:
            return await self._authorizer.refuse("rejected", exc.words, ref, responder,
                                                 "respond_invalid", card, run_id,
                                                 {"action_id": action_id[:200]}, mark=mark)
        rules = policy.of(request, self._ctx.settings)
        if policy.reason_missing(rules, action.id, clean):
            return await self._authorizer.refuse(
                "rejected", reason_needed(card, rules, action.label), ref, responder,
                "respond_reason_missing", card, run_id, {"action_id": action.id}, mark=mark)
        try:
            voter = await policy.voter(rules, self._ctx.settings, responder,
                                       self._authorizer.directory)
        except DirectoryUnavailable:
            return await self._authorizer.refuse("rejected", authz.UNVERIFIED, ref, responder,
                                                 "respond_unverified", card, run_id, mark=mark)
        selected = AskHumanSelectedAction(id=action.id, label=action.label)
        result = AskHumanToolResult(status="submitted", action=selected, values=clean)
        slot = self._resumes.reserve() if self._resumes is not None else None
        try:
            answer = await self._committer.grouped(  # one commit for a burst of decisions
                lambda s: self._decide_claiming(s, slot, ref, responder, result, received,
                                                mark, voter))
        finally:
            if slot is not None and self._resumes is not None:
                self._resumes.release(slot)  # unless its resume started at the commit
        if answer.outcome in ("accepted", "recorded"):  # the card update was tried already
            answer = dataclasses.replace(answer, card=await self._cards.card(ref) if show
                                         else None)
        return answer

    def decide(
        self, session: Session, ref: str, who: Identity, result: AskHumanToolResult,
        received: dt.datetime, mark: inbox.Mark | None = None,
        voter: policy.Voter | None = None,
    ) -> RespondResult:
        """One transaction: lock, re-check (deadline too), vote, and decide when the
        request's frozen policy says so (veto, quorum, sign-offs); a stored click is
        closed with the outcome."""
        now = self._ctx.now()
        request = store.get_request(session, ref, lock=self._ctx.db.is_postgres)
        assert request is not None and result.action is not None
        action = result.action
        if request.status == store.OPEN and _late(request, received):
            return self._late_in(session, ref, who, received, mark)
        if request.status != store.OPEN:
            message = already_decided_message(request, who.platform)
            store.audit(session, now, "respond_already_decided", outcome="refused",
                        run_id=request.run_id, ref=ref, actor=who, reason=str(message))
            return closed(session, now, mark, RespondResult("already_decided", message))
        if edited_since(request, received, action.id):
            message = said("edit.changed_since")
            store.audit(session, now, "respond_after_edit", outcome="refused",
                        run_id=request.run_id, ref=ref, actor=who, reason=str(message))
            return closed(session, now, mark, RespondResult("rejected", message))
        voter = voter or policy.Voter(f"{who.platform}:{who.user_id}")
        rules = policy.of(request, self._ctx.settings)
        earlier = store.votes_of(session, request.id) if policy.may_have_votes(rules) else ()
        votes = apply_edit(session, now, request, who, result, earlier)  # an edit replaces
        previous = store.earlier_vote(votes, who, voter.person)
        if previous is not None:
            message = said("vote.duplicate", action=previous.action_id)
            if (previous.platform, previous.user_id) != (who.platform, who.user_id):
                message = said("vote.duplicate_elsewhere", action=previous.action_id,
                               platform=platform_name(previous.platform))
            store.audit(session, now, "respond_duplicate_vote", outcome="refused",
                        run_id=request.run_id, ref=ref, actor=who, reason=str(message))
            return closed(session, now, mark, RespondResult("rejected", message))
        vote = store.record_vote(session, now, request, who, action.id, result.values,
                                 person=voter.person, signoff=list(voter.signoff))
        ballots = policy.ballots_of([*votes, vote], request, rules)
        reason = ballots[-1].reason
        tool_approval = request.kind == TOOL_APPROVAL
        verdict = "decide" if rules is None else policy.verdict(
            rules, ballots, action.id, policy.style_of(request.args, action.id),
            APPROVE_FAMILY if tool_approval else frozenset())
        if verdict == "wait":
            store.bump_version(session, now, request)
            store.audit(session, now, "vote_recorded", run_id=request.run_id, ref=ref,
                        actor=who, reason=reason, details={
                            "action_id": action.id, "votes": len(ballots),
                            "person": voter.person, "signoff": list(voter.signoff)})
            self._cards.enqueue_update(session, request)
            return closed(session, now, mark, RespondResult(
                "recorded", _progress(rules, ballots)))
        if rules is not None and (rules.needed > 1 or len(ballots) > 1):
            result = result.model_copy(update={"message": policy.summary(ballots, verdict)})
        if not store.resolve(session, now, request, result, who):
            raise RuntimeError("compare-and-set lost under a row lock")  # rolls back the vote
        store.audit(session, now, "decided", run_id=request.run_id, ref=ref, actor=who,
                    reason=reason, details={"action_id": action.id, "values": result.values,
                                            "verdict": verdict, "message": result.message})
        self._cards.enqueue_update(session, request)
        log.info("request decided", extra={"ref": ref, "action_id": action.id})
        grant = None
        if tool_approval and verdict == "decide" and action.id in APPROVE_FAMILY:
            grant = grant_hook.after_approval(session, self._ctx, now, request, [*votes, vote])
        words = grant or said("answer.recorded", label=action.label)
        return closed(session, now, mark, RespondResult("accepted", words,
                                                        tell=grant is not None))

    def _decide_claiming(self, session: Session, slot: Slot | None, ref: str, who: Identity,
                         result: AskHumanToolResult, received: dt.datetime,
                         mark: inbox.Mark | None, voter: policy.Voter | None
                         ) -> RespondResult:
        """``decide``; with a free resume ``slot``, a decision that queues the run's
        resume queues it already claimed (``ResumeWorker.offer`` / ``claim_in``), so the
        resume starts as soon as this commits, with no claim commit or loop between."""
        if slot is None or self._resumes is None:
            return self.decide(session, ref, who, result, received, mark, voter)
        self._resumes.offer(session, slot)
        try:
            answer = self.decide(session, ref, who, result, received, mark, voter)
        except BaseException:
            queued.withdraw(session)  # the next decision in this batch makes its own
            raise
        self._resumes.claim_in(session, slot)
        return answer

    def _late_in(
        self, session: Session, ref: str, who: Identity, received: dt.datetime,
        mark: inbox.Mark | None,
    ) -> RespondResult:
        """Refuse an answer received at or after the deadline, in the caller's transaction,
        and resolve the request as ``timeout`` there too if the sweep has not yet."""
        now = self._ctx.now()
        request = store.get_request(session, ref, lock=self._ctx.db.is_postgres)
        if request is None:
            return closed(session, now, mark, RespondResult("not_found", NOT_FOUND))
        if request.status == store.OPEN:
            self._resolver.resolve_in(session, ref, timeout_result(), "timed_out")
        if request.status in (store.OPEN, "timeout") and request.deadline is not None:
            message = said("closed.timed_out_at",
                           when=f"{as_utc(request.deadline):%Y-%m-%d %H:%M UTC}")
        else:
            message = already_decided_message(request, who.platform)
        store.audit(session, now, "respond_too_late", outcome="refused",
                    run_id=request.run_id, ref=ref, actor=who, reason=str(message),
                    details={"received_at": received.isoformat()})
        return closed(session, now, mark, RespondResult("already_decided", message))

    async def cancel(self, ref: str, actor: Identity, reason: str) -> RespondResult:
        """Withdraw a pending request; the agent is resumed with a ``cancelled`` result."""

        def load(session: Session) -> tuple[HumanRequest, Run, RequestCard, Copies] | None:
            loaded = self._cards.load(session, ref)
            if loaded is None:
                return None
            channels = copies_on(session, loaded[0].id, actor.platform)
            return (*loaded, channels)

        found = await self._committer.read(load)
        if found is None:
            return await self._authorizer.refuse("not_found", NOT_FOUND, ref, actor,
                                                 "cancel_unknown_ref")
        request, run, card, channels = found
        route = policy.route_of(request, self._ctx.settings)
        is_starter = (run.started_by_platform, run.started_by_user) == (
            actor.platform, actor.user_id)
        is_admin = self._ctx.settings.admins.includes(actor.platform, actor.user_id)
        if not is_starter and not is_admin and actor != SYSTEM:
            refusal = authz.NOT_ALLOWED if route is None else await self._authorizer.refusal(
                request, route.model_copy(update={"allow_self_approval": True}), actor,
                store.starter(run), channels)
            if refusal is not None:
                return await self._authorizer.refuse(
                    "rejected", said("refused.cancel"), ref, actor,
                    "cancel_unauthorized", card, run.id)
        return await self._cancelled(ref, actor, reason)

    async def cancel_as_operator(self, ref: str, operator: Identity, reason: str) -> RespondResult:
        """An operator (``askhuman requests cancel``) withdraws a request. The CLI runs
        with the database's own credentials, so no approver check applies; the agent
        gets ``cancelled`` and every card copy is updated through the outbox."""
        return await self._cancelled(ref, operator, reason)

    async def _cancelled(self, ref: str, actor: Identity, reason: str) -> RespondResult:
        """Resolve ``ref`` ``cancelled``: the agent reads "Cancelled by …" in English
        (its result), the person who cancelled reads it in their locale."""
        who = actor.display_name or actor.user_id
        words = said("cancel.done_reason", who=who, reason=reason) if reason else \
            said("cancel.done", who=who)
        return await self._resolver.resolve(ref, cancelled_result(str(words)), "cancelled",
                                            actor, words)

    # ------------------------------------------------------------------ the system

    async def next_expiry_in(self) -> float | None:
        """Seconds (by the engine's clock) until the next pending request's deadline,
        or None when none is ahead: the timeouts loop sleeps until then instead of a
        whole poll interval, so a deadline is swept when it passes. A request created
        meanwhile with a sooner deadline is seen at the next poll at the latest, as
        before (deadlines are minutes away; the poll interval is seconds)."""
        now = self._ctx.now()
        due = await self._committer.read(partial(expiry.next_deadline, now=now))
        # a millisecond past it: timers and the clock may disagree by a little
        return None if due is None else max(0.0, (due - now).total_seconds()) + 0.001

    async def expire_due(self) -> int:
        """Give every overdue pending request Dify's timeout result; returns how many.

        Set-based (``bot.engine.expiry``): one transaction per chunk of requests, the
        resumes, audits and card updates queued with it; the last chunk's commit wakes
        the outbox loop, which sends the card updates concurrently, and the resumes.
        """
        expired, timed_out = 0, timeout_result().status
        while True:
            now = self._ctx.now()
            sweep = partial(expiry.sweep_chunk, now=now, postgres=self._ctx.db.is_postgres,
                            owed=expired > 0, limit=expiry.CHUNK,
                            notify=partial(waiting.queue_timeout_notices, self._ctx, now=now))
            chunk = await self._committer.tx(sweep)
            # committed: the decision histogram counts timeouts too
            metrics.observe_decisions(timed_out, now, ((r.route, r.created_at) for r in chunk))
            expired += len(chunk)
            if chunk:
                log.info("requests timed out", extra={"count": len(chunk)})
            if len(chunk) < expiry.CHUNK:
                return expired


def reason_needed(card: RequestCard, rules: policy.Policy | None, label: str) -> Said:
    """The refusal for a choice that needs a reason, naming the field to fill in."""
    name = rules.reason_field if rules is not None else None
    field = next((f for f in card.args.fields if f.name == name), None)
    shown = quoted(field.label) if field is not None else "Reason"
    return said("refused.reason_needed", label=quoted(label), field=shown, again=quoted(label))


def _progress(rules: policy.Policy | None, ballots: list[policy.Ballot]) -> Said:
    """"Recorded, 1 of 2 approvals: Alice (Approve)." for the person who just voted."""
    needed = rules.needed if rules is not None else 1
    who = ", ".join(f"{b.name} ({b.label})" for b in ballots)
    waiting = [name for name, done in policy.signed_off(rules, ballots) if not done]
    if waiting:
        return said("vote.progress_signoff", votes=len(ballots), needed=needed, who=who,
                    groups=", ".join(waiting))
    return said("vote.progress", votes=len(ballots), needed=needed, who=who)


def _late(request: HumanRequest | CardRow, received: dt.datetime) -> bool:
    """Whether an answer received at ``received`` comes at or after the deadline."""
    return request.deadline is not None and received >= request.deadline


def closed(
    session: Session, now: dt.datetime, mark: inbox.Mark | None, answer: RespondResult
) -> RespondResult:
    """Close the stored click (if any) with ``answer``, in the caller's transaction."""
    if mark is not None:
        inbox.finish(session, mark, now, answer.outcome, answer.words)
    return answer

