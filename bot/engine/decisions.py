"""Decisions: the compare-and-set that settles a request, by a person or the system.

People answer (``respond``), attach files (``attach_files``) or withdraw a request
(``cancel``) after ``access`` has checked they may; the system settles it when it
times out (``expire_due``) or cannot be delivered (``_resolve_in``, from ``dispatch``).
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

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from pydantic import JsonValue
from sqlalchemy.orm import Session

from bot.askhuman.schema import (
    AskHumanSelectedAction,
    AskHumanToolResult,
    cancelled_result,
    timeout_result,
)
from bot.engine import authz, expiry, inbox, policy, store, waiting
from bot.engine.access import NOT_FOUND, AccessMixin, Copies, copies_on
from bot.engine.base import log
from bot.engine.cards import PLATFORM_NAMES, already_decided_message, as_utc
from bot.engine.ports import DirectoryUnavailable, Identity
from bot.engine.results import RespondResult
from bot.engine.values import FILE_KEYS, InvalidValues, check_answer, check_values, quoted
from renderers.card import RequestCard
from storage import HumanRequest, Run, StagedFile

ClickReader = Callable[[RequestCard, str, Mapping[str, Any]], tuple[str, dict[str, JsonValue]]]
"""A platform's ``read_click``: its raw click values → (action id, contract values)."""

SYSTEM = Identity("system", "askhuman", "askhuman")
"""The actor of system resolutions; may always cancel."""


class DecisionsMixin(AccessMixin):
    """Answers, attachments, cancellation and system resolutions of pending requests."""

    async def respond(
        self, ref: str, responder: Identity, action_id: str, values: Mapping[str, JsonValue]
    ) -> RespondResult:
        """A person answered: authorize, validate, then compare-and-set the decision."""
        return await self._respond(ref, responder, action_id, values, None)

    async def _respond(
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
        received = mark.received_at if mark is not None else self.now()
        checked = await self._authorize(ref, responder, "respond", mark)
        if isinstance(checked, RespondResult):
            return checked
        request, run, card, staged, responder = checked  # a delegate acts as the delegator
        if _late(request, received):  # refuse before judging values it no longer needs
            answer = await self._tx(lambda s: self._late_in(s, ref, responder, received, mark))
            self._poke()
            return RespondResult(answer.outcome, answer.message,
                                 await self.card(ref) if show else None)
        if read is not None:
            try:
                action_id, values = read(card, action_id, values)
            except ValueError as exc:
                return await self._refuse("rejected", f"Your answer could not be read: {exc}",
                                          ref, responder, "respond_invalid", card, run.id,
                                          {"action_id": action_id[:200]}, mark=mark)
        args = card.args
        merged: dict[str, Any] = dict(values)
        for name, files in staged.items():
            if not merged.get(name):
                merged[name] = files
        try:
            action, clean = check_answer(args, action_id, merged)
        except InvalidValues as exc:
            return await self._refuse("rejected", str(exc), ref, responder,
                                      "respond_invalid", card, run.id,
                                      {"action_id": action_id[:200]}, mark=mark)
        rules = policy.of(request, self.settings)
        if policy.reason_missing(rules, action.id, clean):
            return await self._refuse("rejected", _reason_needed(card, rules, action.label),
                                      ref, responder, "respond_reason_missing", card, run.id,
                                      {"action_id": action.id}, mark=mark)
        try:
            voter = await policy.voter(rules, self.settings, responder, self._directory)
        except DirectoryUnavailable:
            return await self._refuse("rejected", authz.UNVERIFIED, ref, responder,
                                      "respond_unverified", card, run.id, mark=mark)
        selected = AskHumanSelectedAction(id=action.id, label=action.label)
        result = AskHumanToolResult(status="submitted", action=selected, values=clean)
        answer = await self._grouped(  # one commit for a burst of concurrent decisions
            lambda s: self._decide(s, ref, responder, result, received, mark, voter))
        if answer.outcome in ("accepted", "recorded"):
            self._poke()  # the card update was already tried right after the commit
            answer = RespondResult(answer.outcome, answer.message,
                                   await self.card(ref) if show else None)
        return answer

    def _decide(
        self, session: Session, ref: str, who: Identity, result: AskHumanToolResult,
        received: dt.datetime, mark: inbox.Mark | None = None,
        voter: policy.Voter | None = None,
    ) -> RespondResult:
        """One transaction: lock, re-check (deadline too), vote, and decide when the
        request's frozen policy says so (veto, quorum, sign-offs); a stored click is
        closed with the outcome."""
        now = self.now()
        request = store.get_request(session, ref, lock=self.db.is_postgres)
        assert request is not None and result.action is not None
        action = result.action
        if request.status == store.OPEN and _late(request, received):
            return self._late_in(session, ref, who, received, mark)
        if request.status != store.OPEN:
            message = already_decided_message(request, who.platform)
            store.audit(session, now, "respond_already_decided", outcome="refused",
                        run_id=request.run_id, ref=ref, actor=who, reason=message)
            return _closed(session, now, mark, RespondResult("already_decided", message))
        voter = voter or policy.Voter(f"{who.platform}:{who.user_id}")
        votes = store.votes_of(session, request.id)
        previous = store.earlier_vote(votes, who, voter.person)
        if previous is not None:
            message = (f"Your answer ({previous.action_id}) is already recorded; "
                       "waiting for the other approvers.")
            if (previous.platform, previous.user_id) != (who.platform, who.user_id):
                message = (f"You already answered ({previous.action_id}) on "
                           f"{PLATFORM_NAMES.get(previous.platform, previous.platform)}; "
                           "waiting for the other approvers.")
            store.audit(session, now, "respond_duplicate_vote", outcome="refused",
                        run_id=request.run_id, ref=ref, actor=who, reason=message)
            return _closed(session, now, mark, RespondResult("rejected", message))
        rules = policy.of(request, self.settings)
        vote = store.record_vote(session, now, request, who, action.id, result.values,
                                 person=voter.person, signoff=list(voter.signoff))
        ballots = policy.ballots_of([*votes, vote], request, rules)
        reason = ballots[-1].reason
        verdict = "decide" if rules is None else policy.verdict(
            rules, ballots, action.id, policy.style_of(request.args, action.id))
        if verdict == "wait":
            store.bump_version(session, now, request)
            store.audit(session, now, "vote_recorded", run_id=request.run_id, ref=ref,
                        actor=who, reason=reason, details={
                            "action_id": action.id, "votes": len(ballots),
                            "person": voter.person, "signoff": list(voter.signoff)})
            self._enqueue_update(session, request)
            return _closed(session, now, mark, RespondResult(
                "recorded", _progress(rules, ballots)))
        if rules is not None and (rules.needed > 1 or len(ballots) > 1):
            result = result.model_copy(update={"message": policy.summary(ballots, verdict)})
        if not store.resolve(session, now, request, result, who):
            raise RuntimeError("compare-and-set lost under a row lock")  # rolls back the vote
        store.audit(session, now, "decided", run_id=request.run_id, ref=ref, actor=who,
                    reason=reason, details={"action_id": action.id, "values": result.values,
                                            "verdict": verdict, "message": result.message})
        self._enqueue_update(session, request)
        log.info("request decided", extra={"ref": ref, "action_id": action.id})
        return _closed(session, now, mark, RespondResult(
            "accepted", f"Thanks, your answer ({action.label}) was recorded."))

    def _late_in(
        self, session: Session, ref: str, who: Identity, received: dt.datetime,
        mark: inbox.Mark | None,
    ) -> RespondResult:
        """Refuse an answer received at or after the deadline, in the caller's transaction,
        and resolve the request as ``timeout`` there too if the sweep has not yet."""
        now = self.now()
        request = store.get_request(session, ref, lock=self.db.is_postgres)
        if request is None:
            return _closed(session, now, mark, RespondResult("not_found", NOT_FOUND))
        if request.status == store.OPEN:
            self._resolve_in(session, ref, timeout_result(), "timed_out")
        if request.status in (store.OPEN, "timeout") and request.deadline is not None:
            message = f"This request timed out at {as_utc(request.deadline):%Y-%m-%d %H:%M UTC}."
        else:
            message = already_decided_message(request, who.platform)
        store.audit(session, now, "respond_too_late", outcome="refused",
                    run_id=request.run_id, ref=ref, actor=who, reason=message,
                    details={"received_at": received.isoformat()})
        return _closed(session, now, mark, RespondResult("already_decided", message))

    async def attach_files(
        self, ref: str, responder: Identity, field_name: str, files: Sequence[Mapping[str, Any]]
    ) -> RespondResult:
        """Stage file references for a file field until the person submits the form."""
        return await self._attach(ref, responder, {field_name: list(files)}, None)

    async def _attach(
        self, ref: str, responder: Identity, wanted: Mapping[str, Any],
        mark: inbox.Mark | None,
    ) -> RespondResult:
        """Stage files for one or more file fields in one transaction (all or none);
        ``wanted`` maps field names to lists of file references."""
        checked = await self._authorize(ref, responder, "attach", mark)
        if isinstance(checked, RespondResult):
            return checked
        request, run, card, staged, _acting = checked
        batch: list[tuple[str, str, list[dict[str, Any]]]] = []
        try:
            for field_name, files in wanted.items():
                field = next((f for f in card.args.fields if f.name == field_name), None)
                if field is None or field.type not in ("file", "file-list"):
                    raise InvalidValues(f"This request has no file field {quoted(field_name)}")
                if not isinstance(files, list) or not all(isinstance(f, Mapping) for f in files):
                    raise InvalidValues(f"Unreadable files for {quoted(field.label)}")
                cleaned = [{k: f.get(k) for k in FILE_KEYS} for f in files]
                combined = staged.get(field_name, []) + cleaned
                check_values(card.args.model_copy(update={"fields": [field]}),
                             {field_name: combined})
                batch.append((field_name, field.label, cleaned))
        except InvalidValues as exc:
            return await self._refuse("rejected", str(exc), ref, responder, "attach_invalid",
                                      card, run.id, mark=mark)
        now = self.now()
        message = "; ".join(f"Attached {len(cleaned)} file(s) to {quoted(label)}"
                            for _, label, cleaned in batch) + "; submit the form to send them."

        def stage(session: Session) -> None:
            for field_name, _label, cleaned in batch:
                session.add(StagedFile(request_id=request.id, platform=responder.platform,
                                       user_id=responder.user_id, field_name=field_name,
                                       files=cleaned, created_at=now))
                store.audit(session, now, "files_attached", run_id=run.id, ref=ref,
                            actor=responder,
                            details={"field": field_name, "count": len(cleaned)})
            _closed(session, now, mark, RespondResult("recorded", message))

        await self._tx(stage)
        return RespondResult("recorded", message, card)

    async def cancel(self, ref: str, actor: Identity, reason: str) -> RespondResult:
        """Withdraw a pending request; the agent is resumed with a ``cancelled`` result."""

        def load(session: Session) -> tuple[HumanRequest, Run, RequestCard, Copies] | None:
            loaded = self._load(session, ref)
            if loaded is None:
                return None
            channels = copies_on(session, loaded[0].id, actor.platform)
            return (*loaded, channels)

        found = await self._read(load)
        if found is None:
            return await self._refuse("not_found", NOT_FOUND, ref, actor, "cancel_unknown_ref")
        request, run, card, channels = found
        route = policy.route_of(request, self.settings)
        is_starter = (run.started_by_platform, run.started_by_user) == (
            actor.platform, actor.user_id)
        is_admin = self.settings.admins.includes(actor.platform, actor.user_id)
        if not is_starter and not is_admin and actor != SYSTEM:
            refusal = authz.NOT_ALLOWED if route is None else await self._refusal(
                request, route.model_copy(update={"allow_self_approval": True}), actor,
                store.starter(run), channels)
            if refusal is not None:
                return await self._refuse("rejected", "You are not allowed to cancel this "
                                          "request.", ref, actor, "cancel_unauthorized", card,
                                          run.id)
        who = actor.display_name or actor.user_id
        result = cancelled_result(f"Cancelled by {who}: {reason}" if reason else
                                  f"Cancelled by {who}.")
        return await self._resolve_system(ref, result, "cancelled", actor)

    async def cancel_as_operator(self, ref: str, operator: Identity, reason: str) -> RespondResult:
        """An operator (``askhuman requests cancel``) withdraws a request. The CLI runs
        with the database's own credentials, so no approver check applies; the agent
        gets ``cancelled`` and every card copy is updated through the outbox."""
        who = operator.display_name or operator.user_id
        result = cancelled_result(f"Cancelled by {who}: {reason}" if reason else
                                  f"Cancelled by {who}.")
        return await self._resolve_system(ref, result, "cancelled", operator)

    # ------------------------------------------------------------------ the system

    async def expire_due(self) -> int:
        """Give every overdue pending request Dify's timeout result; returns how many.

        Set-based (``bot.engine.expiry``): one transaction per chunk of requests, the
        resumes, audits and card updates queued with it; the outbox loop then sends
        the card updates concurrently.
        """
        expired = 0
        while True:
            now = self.now()
            sweep = partial(expiry.expire_chunk, now=now, postgres=self.db.is_postgres,
                            notify=partial(waiting.queue_timeout_notices, self, now=now))
            chunk = await self._tx(sweep)
            expired += len(chunk)
            if chunk:
                log.info("requests timed out", extra={"count": len(chunk)})
                self._poke()
                self._poke_outbox()
            if len(chunk) < expiry.CHUNK:
                return expired

    async def _resolve_system(
        self, ref: str, result: AskHumanToolResult, event: str, actor: Identity | None = None
    ) -> RespondResult:
        """Compare-and-set a non-human outcome (timeout, cancel, unavailable)."""
        answer = await self._tx(lambda s: self._resolve_in(s, ref, result, event, actor))
        if answer.outcome == "accepted":
            self._poke()
        return RespondResult(answer.outcome, answer.message, await self.card(ref))

    def _resolve_in(
        self, session: Session, ref: str, result: AskHumanToolResult, event: str,
        actor: Identity | None = None,
    ) -> RespondResult:
        """The compare-and-set itself, inside the caller's transaction (queues the resume
        and the card update with it)."""
        now = self.now()
        request = store.get_request(session, ref, lock=self.db.is_postgres)
        if request is None:
            return RespondResult("not_found", NOT_FOUND)
        if not store.resolve(session, now, request, result, actor):
            message = already_decided_message(request)
            store.audit(session, now, f"{event}_too_late", outcome="refused",
                        run_id=request.run_id, ref=ref, actor=actor, reason=message)
            return RespondResult("already_decided", message)
        store.audit(session, now, event, run_id=request.run_id, ref=ref, actor=actor,
                    reason=result.message)
        if result.status == "timeout":
            waiting.queue_timeout_notices(self, session, [request.id], now=now)
        self._enqueue_update(session, request)
        log.info("request resolved", extra={"ref": ref, "status": result.status})
        return RespondResult("accepted", result.message or event)


def _reason_needed(card: RequestCard, rules: policy.Policy | None, label: str) -> str:
    """The refusal for a choice that needs a reason, naming the field to fill in."""
    name = rules.reason_field if rules is not None else None
    field = next((f for f in card.args.fields if f.name == name), None)
    shown = quoted(field.label) if field is not None else "Reason"
    return (f"{quoted(label)} needs a reason: write it in the {shown} field, then choose "
            f"{quoted(label)} again. Nothing was recorded yet.")


def _progress(rules: policy.Policy | None, ballots: list[policy.Ballot]) -> str:
    """"Recorded, 1 of 2 approvals: Alice (Approve)." for the person who just voted."""
    needed = rules.needed if rules is not None else 1
    who = ", ".join(f"{b.name} ({b.label})" for b in ballots)
    text = f"Recorded, {len(ballots)} of {needed} approvals: {who}."
    waiting = [name for name, done in policy.signed_off(rules, ballots) if not done]
    if waiting:
        text += f" Still needs sign-off from: {', '.join(waiting)}."
    return text


def _late(request: HumanRequest, received: dt.datetime) -> bool:
    """Whether an answer received at ``received`` comes at or after the deadline."""
    return request.deadline is not None and received >= request.deadline


def _closed(
    session: Session, now: dt.datetime, mark: inbox.Mark | None, answer: RespondResult
) -> RespondResult:
    """Close the stored click (if any) with ``answer``, in the caller's transaction."""
    if mark is not None:
        inbox.finish(session, mark, now, answer.outcome, answer.message)
    return answer
