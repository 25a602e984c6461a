"""What a transaction queued for the worker loops, noted on its session.

``store.resolve`` and the timeout sweep queue resume jobs, and the sweep queues card
updates for the outbox loop, inside their transactions. They note it here; once the
transaction commits, the ``Committer`` reads the notes (``taken``) and the composition
root wakes the loops that have work (``Wakeups``), so no caller has to remember to poke
them, and a rolled-back transaction wakes nobody.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

RESUMES_KEY = "askhuman.resumes_queued"
OUTBOX_KEY = "askhuman.outbox_queued"


def resumes(session: Session) -> None:
    """This transaction queued at least one resume job."""
    session.info[RESUMES_KEY] = True


def outbox_rows(session: Session) -> None:
    """This transaction queued outbox rows for the outbox loop (not claimed by us)."""
    session.info[OUTBOX_KEY] = True


def taken(session: Session) -> tuple[bool, bool]:
    """(resumes queued, outbox rows queued) in this transaction; the notes are removed."""
    return bool(session.info.pop(RESUMES_KEY, False)), bool(session.info.pop(OUTBOX_KEY, False))
