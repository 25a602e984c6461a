"""The click inbox: a click is stored before it is acknowledged, and decided from the row.

Slack and Feishu never resend a click they got an acknowledgement for, so the listener
first inserts the click here (``record``, group-committed), then acks, then decides.
The row is born claimed by the listener (``running`` with a lease and a claim token).
Deciding ends with ``finish``, a compare-and-set on that token committed in the *same*
transaction as the decision (or the refusal's audit row), so each row is decided
exactly once. A row left behind by a crash, or released after an error, is claimed
again by the worker (``claim_next``: queued and due, or its lease ran out), which
decides it and then tells the clicker (state ``telling`` until that message went out).

States: running → done, or → telling → done (decided by a worker), or → queued
(retry later) → running…, or → failed (gave up; the clicker is told to click again).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import JsonValue
from sqlalchemy import Table, and_, bindparam, delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from bot.engine import leases
from bot.engine.ports import Identity
from bot.engine.results import EngineError
from bot.engine.store import MAX_REF_CHARS, core, rowcount
from bot.logs import scrub
from renderers.words import Said, said
from storage import ClickInbox, HumanRequest

MAX_VALUES_BYTES = 256 * 1024
"""Values bigger than this (as JSON) are refused before anything is stored."""
MAX_MESSAGE_CHARS = 4000
"""Longest text kept in a row's ``message``."""
RECORDED = ("running", "queued")
"""States of a click that is stored but not decided yet."""


class ClickTooLarge(EngineError):
    """The click's values exceed ``MAX_VALUES_BYTES``: refused, nothing is stored."""


class ClickTakenOver(Exception):
    """The row is no longer ours (its lease ran out and a worker claimed it): roll back."""


@dataclass(frozen=True)
class Click:
    """A click (or a form submit) as a platform delivered it, signature-checked.

    ``kind`` is ``respond`` (a button: ``action_id`` with ``values``, either contract
    values or, for adapters with ``read_click``, what the platform sent, read with the
    card when deciding) or ``attach`` (``values`` maps file field names to file
    references).
    ``reply_to`` says where the clicker can be told the outcome later (Slack:
    ``channel``; Feishu: ``message``); it is platform-specific and never a secret.
    """

    platform: str
    ref: str
    responder: Identity
    action_id: str
    values: Mapping[str, JsonValue]
    kind: str = "respond"
    reply_to: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Mark:
    """The right to decide one stored click: its row, claim token and received time.

    ``then`` is the state the decision leaves the row in: ``done``, or ``telling``
    when a worker still has to tell the clicker what happened.
    """

    id: int
    token: str
    received_at: dt.datetime
    then: str = "done"
    then_refused: str | None = None
    """The state any outcome but ``accepted`` leaves the row in, when it differs from
    ``then``: ``telling`` while a listener tells the clicker after its reply
    (``ClickInbox.decide_click(tell_later=True)``), so a failed or lost message is
    retried by the worker."""


@dataclass(frozen=True)
class Recorded:
    """A click stored in the inbox (what ``Engine.record_click`` hands back)."""

    click: Click
    mark: Mark


@dataclass(frozen=True)
class Claimed:
    """A row a worker claimed: the click, the claim, and what was decided so far."""

    click: Click
    mark: Mark
    state: str
    """The state it was claimed in (``telling``: decided, only the message is left)."""
    attempts: int
    outcome: str | None
    message: Said | None
    """What the clicker is told (``Said.from_stored``: a row written before messages
    were keys holds English text, told as it is)."""


def check_size(click: Click) -> None:
    """Refuse oversize values before they reach the database."""
    size = len(json.dumps(click.values, default=str, ensure_ascii=False).encode())
    if size > MAX_VALUES_BYTES:
        raise ClickTooLarge(said("click.too_large", size=size // 1024,
                                 limit=MAX_VALUES_BYTES // 1024))


class AlreadySeen(Exception):
    """A click whose dedupe key (``"nonce:…"`` or ``"event:…"``) was recorded before:
    a platform retry or a replay. Nothing was stored."""

    def __init__(self, key: str) -> None:
        super().__init__(f"already seen: {key}")
        self.key = key


_TABLE = cast(Table, ClickInbox.__table__)


def new_row(click: Click, received_at: dt.datetime, hold: leases.Hold,
            token: str) -> dict[str, Any]:
    """The row storing ``click``, claimed (``token``) by ``hold.holder`` until
    ``received_at + hold.lease``."""
    who = click.responder
    return {
        "platform": click.platform[:32], "kind": click.kind, "ref": click.ref[:MAX_REF_CHARS],
        "user_id": who.user_id[:200],
        "display_name": who.display_name[:200] if who.display_name else None,
        "team": who.team[:64] if who.team else None,
        "enterprise": who.enterprise[:64] if who.enterprise else None,
        "action_id": click.action_id[:200], "values": dict(click.values),
        "reply_to": {k: str(v)[:200] for k, v in click.reply_to.items()},
        "received_at": received_at, "state": "running", "attempts": 1,
        "next_attempt_at": received_at, "lease_until": received_at + hold.lease,
        "claim_token": token, "holder": hold.holder, "updated_at": received_at,
    }


def insert_many(session: Session, rows: list[dict[str, Any]]) -> list[int]:
    """Store several clicks with one INSERT; their ids, in the order of ``rows``.

    The clicks of a burst wait for this commit before their acks, and it runs on a
    thread that shares the GIL with the event loop answering the burst: every call into
    the database driver hands the GIL over and back. So SQLite gets one plain
    multi-row INSERT with the ids chosen here (``_insert_many_sqlite``); PostgreSQL a
    Core INSERT … RETURNING (psycopg fetches the ids in one round trip).
    """
    if not rows:
        return []
    connection = session.connection()
    if connection.dialect.name == "sqlite":
        return _insert_many_sqlite(connection, rows)
    table = _TABLE
    statement = insert(table).returning(table.c.id, sort_by_parameter_order=True)
    return [int(row_id) for row_id in connection.execute(statement, rows).scalars()]


SQLITE_MAX_VARIABLES = 32766
"""SQLite's bound-parameter limit since 3.32 (the rows are split to stay below it)."""


def _insert_many_sqlite(connection: Connection, rows: list[dict[str, Any]]) -> list[int]:
    """``rows`` with ids ``max(id) + 1 …``, in one INSERT per chunk: three statements
    whatever the burst's size, where ``RETURNING`` steps (and hands the GIL over) once
    per row.

    The ids are safe to choose: every write transaction on SQLite starts with ``BEGIN
    IMMEDIATE`` (``storage.db``), so no other connection, here or in another process,
    inserts until this one commits, and ``max(id) + 1`` is what SQLite itself assigns
    to an ``INTEGER PRIMARY KEY`` (the table has no ``AUTOINCREMENT``). Values go
    through the columns' own bind processors, so they are stored exactly as the ORM
    stores them (JSON text, datetime strings).
    """
    table = _TABLE
    names = ["id", *rows[0]]
    columns = [table.c[name] for name in names]
    dialect = connection.dialect
    processors = [column.type.dialect_impl(dialect).bind_processor(dialect) for column in columns]
    first = int(connection.exec_driver_sql(
        "SELECT coalesce(max(id), 0) + 1 FROM click_inbox").scalar_one())
    ids = list(range(first, first + len(rows)))
    quoted = ", ".join(dialect.identifier_preparer.quote(name) for name in names)
    one = "(" + ", ".join("?" * len(names)) + ")"
    per_chunk = max(1, SQLITE_MAX_VARIABLES // len(names))
    for start in range(0, len(rows), per_chunk):
        chunk = rows[start:start + per_chunk]
        params: list[Any] = []
        for row_id, row in zip(ids[start:], chunk, strict=False):
            values = (row_id, *(row[name] for name in names[1:]))
            params += [value if process is None or value is None else process(value)
                       for process, value in zip(processors, values, strict=True)]
        connection.exec_driver_sql(
            f"INSERT INTO click_inbox ({quoted}) VALUES {', '.join([one] * len(chunk))}",
            tuple(params))
    return ids


def _ours(mark: Mark, *states: str) -> Any:
    return and_(ClickInbox.id == mark.id, ClickInbox.claim_token == mark.token,
                ClickInbox.state.in_(states or ("running",)))


def finish(session: Session, mark: Mark, now: dt.datetime, outcome: str, message: Said) -> None:
    """Close the row with the decision's outcome, in the decision's own transaction.

    Raises ``ClickTakenOver`` when the row is no longer ours, which rolls the whole
    transaction back: the worker that took it over decides instead.
    """
    state = mark.then_refused if mark.then_refused and outcome != "accepted" else mark.then
    if not close(session, mark, now, state, outcome=outcome, message=message,
                 was=("running",)):
        raise ClickTakenOver(f"click {mark.id} was taken over by another worker")


def release(session: Session, mark: Mark, now: dt.datetime, delay: dt.timedelta,
            error: str, *, state: str = "running") -> None:
    """Give the row back for a retry after ``delay`` (deciding or telling failed)."""
    back = "telling" if state == "telling" else "queued"
    values: dict[str, Any] = {"next_attempt_at": now + delay,
                              "last_error": scrub(error)[:2000], "updated_at": now}
    if back == "queued":
        values.update(state="queued", lease_until=None, claim_token=None)
    else:
        values.update(lease_until=now + delay)
    session.execute(update(ClickInbox).where(_ours(mark, state)).values(**values)
                    .execution_options(synchronize_session=False))


_CLOSE = update(_TABLE).where(
    _TABLE.c.id == bindparam("mark_id"), _TABLE.c.claim_token == bindparam("mark_token"),
    _TABLE.c.state.in_(bindparam("was", expanding=True)))
"""Built once (every decided click closes its row): the SET clause comes from the
column names among the parameters."""


def close(session: Session, mark: Mark, now: dt.datetime, state: str, *,
          outcome: str | None = None, message: Said | None = None,
          was: tuple[str, ...] = ("running", "telling")) -> bool:
    """Set the row's final (or telling) state if it is still ours; True if it was.

    ``message`` is stored as its key and parameters (``Said.to_json``), so the clicker
    is told in their own locale later; words too long for the column are stored as
    their English text (read back verbatim)."""
    values: dict[str, Any] = {"state": state, "updated_at": now, "last_error": None}
    if state != "telling":  # telling keeps its lease: the holder tells, then closes
        values["lease_until"] = None
    if outcome is not None:
        values["outcome"] = outcome
    if message is not None:
        stored = message.to_json()
        values["message"] = stored if len(stored) <= MAX_MESSAGE_CHARS \
            else str(message)[:MAX_MESSAGE_CHARS]
    return rowcount(core(session).execute(_CLOSE, {"mark_id": mark.id, "mark_token": mark.token,
                                             "was": list(was), **values})) == 1


def claim_next(session: Session, now: dt.datetime, lease: dt.timedelta,
               postgres: bool, claimant: leases.Claimant = leases.NOBODY) -> Claimed | None:
    """Claim the oldest row a worker should handle: queued and due, or running/telling
    with an expired lease or a dead holder (its holder died or gave it back)."""
    claimed = leases.claim_oldest(session, ClickInbox, now, lease, postgres,
                                  held=("running", "telling"), claimant=claimant)
    if claimed is None:
        return None
    row, token, attempts = claimed
    state = "telling" if row.state == "telling" else "running"
    click = Click(platform=row.platform, ref=row.ref,
                  responder=Identity(row.platform, row.user_id, row.display_name,
                                     team=row.team, enterprise=row.enterprise),
                  action_id=row.action_id, values=dict(row.values or {}), kind=row.kind,
                  reply_to=dict(row.reply_to or {}))
    told = Said.from_stored(row.message) if row.message is not None else None
    return Claimed(click, Mark(row.id, token, row.received_at), state, attempts,
                   row.outcome, told)


def prune(session: Session, before: dt.datetime) -> int:
    """Delete closed rows (done, failed) last touched before ``before``; how many went."""
    return rowcount(session.execute(
        delete(ClickInbox).where(ClickInbox.state.in_(("done", "failed")),
                                 ClickInbox.updated_at < before)
        .execution_options(synchronize_session=False)))


def undecided_before_deadline() -> Any:
    """A correlated condition for ``human_requests`` queries: the request has a stored,
    undecided click received before its deadline (so the timeout must wait for it)."""
    return (select(ClickInbox.id)
            .where(ClickInbox.ref == HumanRequest.ref, ClickInbox.kind == "respond",
                   ClickInbox.state.in_(RECORDED),
                   ClickInbox.received_at <= HumanRequest.deadline)
            .exists())
