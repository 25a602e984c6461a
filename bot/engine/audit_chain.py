"""The tamper-evident audit log: a hash chain sealed behind the writers.

Writers insert audit rows as before (no lock, no extra work on the click path). A
sealer (every few seconds in the bot, and before ``askhuman audit verify``) locks
the one-row ``audit_chain_head`` and gives the unsealed rows, in id order, the next
chain positions: ``row_hash = sha256(prev_hash + canonical content)``. Because only
the sealer under that lock extends the chain, replicas never fork it, and a row that
commits late (PostgreSQL ids are not commit-ordered) simply gets a later position.

What is hashed is what never legitimately changes: time, event, outcome, run, request,
actor, reason and details, with the answer values in ``details`` replaced by their
digest (retention redacts values and keeps the digest in ``values_sha256``).
``occurrences`` / ``last_seen_at`` of aggregated refusals are counters, updated in
place, and not hashed. Retention deletes sealed rows only through ``record_gaps``,
which leaves an ``audit_chain_gaps`` row per jump, so ``verify`` still passes after
pruning and fails, naming the row, after any other edit or deletion.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from storage import AuditChainGap, AuditChainHead, AuditLog

GENESIS = "0" * 64
SEAL_BATCH = 1000


def digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


def content(row: AuditLog) -> dict[str, Any]:
    """The immutable part of a row, as hashed."""
    details = dict(row.details or {}) if isinstance(row.details, dict) else {
        "_": row.details}
    if "values_sha256" in details:
        details["values"] = {"sha256": details.pop("values_sha256")}
    elif "values" in details:
        details["values"] = {"sha256": digest(details["values"])}
    created = row.created_at.replace(tzinfo=None).isoformat(timespec="microseconds")
    return {"at": created, "event": row.event, "outcome": row.outcome, "run": row.run_id,
            "ref": row.request_ref, "actor_platform": row.actor_platform,
            "actor": row.actor_user, "reason": row.reason, "details": details}


def row_hash(prev: str, row: AuditLog) -> str:
    return hashlib.sha256((prev + "\n" + canonical_json(content(row))).encode()).hexdigest()


def redacted_details(details: dict[str, Any]) -> dict[str, Any]:
    """``details`` with its answer values removed but their digest kept (retention)."""
    kept = details.get("values_sha256") or digest(details.get("values"))
    return {**details, "values": {}, "values_sha256": kept}


def _head(session: Session) -> AuditChainHead:
    """The chain head, locked for this transaction (created if a database lacks it)."""
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    session.execute(dialect.insert(AuditChainHead)
                    .values(id=1, seq=0, last_hash=GENESIS).on_conflict_do_nothing())
    head = session.scalars(select(AuditChainHead).where(AuditChainHead.id == 1)
                           .with_for_update()).one()
    return head


def seal(session: Session, now: dt.datetime, limit: int = SEAL_BATCH) -> int:
    """Chain up to ``limit`` unsealed rows (in id order); returns how many."""
    pending = session.scalars(select(AuditLog).where(AuditLog.chain_seq.is_(None))
                              .order_by(AuditLog.id).limit(limit)).all()
    if not pending:
        return 0
    head = _head(session)
    # Under the lock: re-read, another sealer may have taken some meanwhile.
    pending = session.scalars(select(AuditLog).where(AuditLog.chain_seq.is_(None))
                              .order_by(AuditLog.id).limit(limit)
                              .execution_options(populate_existing=True)).all()
    seq, last = head.seq, head.last_hash
    sealed: list[dict[str, object]] = []
    for row in pending:
        seq += 1
        digest_ = row_hash(last, row)
        sealed.append({"row_id": row.id, "seq": seq, "prev": last, "digest": digest_})
        last = digest_
    if sealed:  # one executemany, not one statement per row
        session.connection().execute(
            update(AuditLog).where(AuditLog.id == bindparam("row_id"))
            .values(chain_seq=bindparam("seq"), prev_hash=bindparam("prev"),
                    row_hash=bindparam("digest")), sealed)
    head.seq, head.last_hash, head.updated_at = seq, last, now
    return len(pending)


def record_gaps(session: Session, now: dt.datetime, ids: Sequence[int]) -> None:
    """Before retention deletes the rows ``ids``: seal them if needed and record, for
    each run of neighbouring chain rows being deleted, the jump it leaves behind."""
    if not ids:
        return
    seal(session, now)
    _head(session)  # one pruner at a time
    doomed = sorted(seq for seq in session.scalars(
        select(AuditLog.chain_seq).where(AuditLog.id.in_(list(ids)))) if seq is not None)
    runs: list[list[int]] = []
    for seq in doomed:
        if runs and _neighbours(session, runs[-1][-1], seq):
            runs[-1].append(seq)
        else:
            runs.append([seq])
    for run in runs:
        _record_run(session, now, run[0], run[-1], len(run))


def _neighbours(session: Session, low: int, high: int) -> bool:
    """No row is left between chain positions ``low`` and ``high``."""
    between = session.scalars(select(AuditLog.id).where(
        AuditLog.chain_seq > low, AuditLog.chain_seq < high).limit(1)).first()
    return between is None


def _record_run(session: Session, now: dt.datetime, first: int, last: int, rows: int) -> None:
    before = session.scalars(select(AuditLog).where(AuditLog.chain_seq < first)
                             .order_by(AuditLog.chain_seq.desc()).limit(1)).first()
    after_seq = before.chain_seq if before is not None and before.chain_seq else 0
    from_hash = before.row_hash if before is not None and before.row_hash else GENESIS
    end_row = session.scalars(select(AuditLog).where(AuditLog.chain_seq == last)).one()
    to_hash = str(end_row.row_hash)
    # Earlier jumps inside or at the edges of this run merge into one.
    old = session.scalars(select(AuditChainGap).where(
        AuditChainGap.after_seq >= after_seq, AuditChainGap.after_seq <= last)).all()
    for gap in old:
        rows += gap.rows
        if gap.after_seq == last:
            to_hash = gap.to_hash
        session.delete(gap)
    session.flush()
    session.add(AuditChainGap(after_seq=after_seq, from_hash=from_hash, to_hash=to_hash,
                              rows=rows, pruned_at=now))
    session.flush()


@dataclass
class Verdict:
    ok: bool
    checked: int
    gaps: int
    unsealed: int
    broken_id: int | None = None
    problem: str | None = None
    head_seq: int = 0


def verify(session: Session) -> Verdict:
    """Walk the chain in order; the first row whose hash or link is wrong is named."""
    gaps = {g.after_seq: g for g in session.scalars(select(AuditChainGap))}
    head = session.get(AuditChainHead, 1)
    head_seq = head.seq if head else 0
    unsealed = len(session.scalars(select(AuditLog.id).where(AuditLog.chain_seq.is_(None)))
                   .all())
    prev_seq, last, checked, used = 0, GENESIS, 0, 0
    query = (select(AuditLog).where(AuditLog.chain_seq.is_not(None))
             .order_by(AuditLog.chain_seq).execution_options(yield_per=500))
    with session.scalars(query) as rows:  # closes the server-side cursor on an early return
        for row in rows:
            if row.prev_hash != last:
                gap = gaps.get(prev_seq)
                if gap is None or gap.from_hash != last or gap.to_hash != row.prev_hash:
                    return Verdict(False, checked, used, unsealed, row.id,
                                   "its link to the row before it does not match (a row "
                                   "before it was deleted or changed)", head_seq)
                used += 1
            if row_hash(str(row.prev_hash), row) != row.row_hash:
                return Verdict(False, checked, used, unsealed, row.id,
                               "its content was changed after it was sealed", head_seq)
            prev_seq, last, checked = int(row.chain_seq or 0), str(row.row_hash), checked + 1
    if head is not None and head.last_hash != last:
        gap = gaps.get(prev_seq)
        if gap is None or gap.from_hash != last or gap.to_hash != head.last_hash:
            return Verdict(False, checked, used, unsealed, None,
                           f"the newest sealed rows are missing (the chain head is at "
                           f"position {head.seq}, the last row found at {prev_seq})",
                           head_seq)
        used += 1
    return Verdict(True, checked, used, unsealed, head_seq=head_seq)
