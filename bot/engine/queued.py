"""What a transaction queued for the worker loops, noted on its session.

``store.resolve`` and the timeout sweep queue resume jobs, and the sweep queues card
updates for the outbox loop, inside their transactions. They note it here; once the
transaction commits, the ``Committer`` reads the notes (``taken``) and the composition
root wakes the loops that have work (``Wakeups``), so no caller has to remember to poke
them, and a rolled-back transaction wakes nobody.

A decision that found one of this process's resume slots free claims its resume in
its own transaction (``ResumeWorker.claim_in``); it notes the slot here too, and once
the transaction commits the resume starts from the commit hook (``slots``), so it
waits for no other transaction and no loop. The slot is offered to the resume job the
decision queues (``offer``): ``store.resolve`` inserts that job already claimed, one
INSERT instead of an INSERT and a claiming UPDATE inside the write lock. A resume
claimed that way is not announced to the resume loop (``claimed``): nothing is left
for it to do.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

if TYPE_CHECKING:
    from storage import HumanRequest

RESUMES_KEY = "askhuman.resumes_queued"
OUTBOX_KEY = "askhuman.outbox_queued"
SLOTS_KEY = "askhuman.resume_slots"
OFFER_KEY = "askhuman.resume_offer"
UNKNOWN = 0
"""The request id noted for resume jobs queued without one (the timeout sweep's)."""


def resumes(session: Session, request_id: int = UNKNOWN) -> None:
    """This transaction queued at least one resume job (of ``request_id``, when known)."""
    session.info.setdefault(RESUMES_KEY, set()).add(request_id)


def resume_ids(session: Session) -> frozenset[int]:
    """The requests whose resume jobs this transaction queued so far (``UNKNOWN`` among
    them: some whose requests are not known)."""
    return frozenset(session.info.get(RESUMES_KEY, ()))


def claimed(session: Session, request_ids: set[int]) -> None:
    """The resume jobs of ``request_ids`` were claimed in this same transaction: the
    resume loop need not be woken for them."""
    left = session.info.get(RESUMES_KEY, set()) - request_ids
    if left:
        session.info[RESUMES_KEY] = left
    else:
        session.info.pop(RESUMES_KEY, None)


def outbox_rows(session: Session) -> None:
    """This transaction queued outbox rows for the outbox loop (not claimed by us)."""
    session.info[OUTBOX_KEY] = True


def hold(session: Session, slot: Any) -> None:
    """This transaction holds a resume slot (``ResumeWorker.claim_in``): the commit hook
    starts what it claimed, or frees it."""
    session.info.setdefault(SLOTS_KEY, []).append(slot)


def slots(session: Session) -> tuple[Any, ...]:
    """The resume slots this transaction held; the notes are removed."""
    return tuple(session.info.pop(SLOTS_KEY, ()))


def taken(session: Session) -> tuple[bool, bool]:
    """(resumes queued, outbox rows queued) in this transaction; the notes are removed."""
    return bool(session.info.pop(RESUMES_KEY, None)), bool(session.info.pop(OUTBOX_KEY, False))


@dataclass
class Offer:
    """A free resume slot offered to the next resume job this transaction queues: the
    job is born claimed with these values (as ``leases.claim_many`` would set them),
    and ``store.resolve`` fills in which job took it."""

    token: str
    lease_until: dt.datetime
    holder: str | None
    job_id: int | None = None
    request: HumanRequest | None = None
    """The request whose job took the offer, as loaded in this transaction
    (held here: a session keeps unchanged rows only while someone refers to them)."""


def offer(session: Session, slot_offer: Offer) -> None:
    """Offer a slot to the resume job this transaction queues next (``ResumeWorker``)."""
    session.info[OFFER_KEY] = slot_offer


def open_offer(session: Session) -> Offer | None:
    """The offer a resume job being queued may take (None: none, or already taken)."""
    found: Offer | None = session.info.get(OFFER_KEY)
    return found if found is not None and found.job_id is None else None


def withdraw(session: Session) -> Offer | None:
    """Remove the offer (taken or not) once the decision that made it is written."""
    found: Offer | None = session.info.pop(OFFER_KEY, None)
    return found
