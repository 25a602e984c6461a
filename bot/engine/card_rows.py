"""What a card shows, read as plain Core rows: the reads of clicks and card updates.

Every click reads the request to check who may answer, and every vote and decision
queues a card update that reads it again with its copies and the versions they show.
Loaded as ORM objects, the card update's read cost ~0.8 ms of CPU per decision in a
busy ``serve`` (thread time, measured in place): the ORM builds instance state and an
identity map for rows these readers only look at. As Core rows (through
``store.core``, not the ORM's ``Session.execute``) in a frozen dataclass it costs
~0.56 ms. ``build_card``, the policy and the access checks read a ``CardRow`` exactly
like a ``HumanRequest`` (``bot.engine.cards.Shown``, ``bot.engine.policy.Ruled``,
``bot.engine.access.Judged``).

Only readers use these rows; whatever changes a request (the decision itself) loads
the ORM object in its own transaction.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, bindparam, func, select
from sqlalchemy.orm import Session

from bot.engine import store
from bot.engine.ports import DeliveryRef
from storage import Delivery, HumanRequest, Run, Vote

_REQUESTS = cast(Table, HumanRequest.__table__)
_RUNS = cast(Table, Run.__table__)
_DELIVERIES = cast(Table, Delivery.__table__)
_VOTES = cast(Table, Vote.__table__)


@dataclass(frozen=True, slots=True)
class CardRow:
    """The columns of one request its card, its rules and its access checks read, with
    its run's agent and starter and how many responses it has. The names are
    ``HumanRequest``'s and ``Run``'s."""

    id: int
    ref: str
    run_id: str
    route: str
    kind: str
    status: str
    version: int
    quorum: int
    args: dict[str, Any]
    policy: dict[str, Any] | None
    result: dict[str, Any] | None
    tool: dict[str, Any] | None
    deadline: dt.datetime | None
    decided_by_platform: str | None
    decided_by_user: str | None
    decided_by_name: str | None
    decided_at: dt.datetime | None
    decided_via: str | None
    action_id: str | None
    reminded_at: dt.datetime | None
    escalated_at: dt.datetime | None
    escalation_route: str | None
    escalated_routes: list[str] | None
    agent: str
    started_by_platform: str
    started_by_user: str
    started_by_name: str | None
    votes: int


_RUN_COLUMNS = ("agent", "started_by_platform", "started_by_user", "started_by_name")
_COLUMNS = tuple(name for name in CardRow.__slots__
                 if name not in (*_RUN_COLUMNS, "votes"))
_VOTE_COUNT = (select(func.count()).select_from(_VOTES)
               .where(_VOTES.c.request_id == _REQUESTS.c.id)
               .correlate(_REQUESTS).scalar_subquery())
_CARD_ROW = (
    select(*(_REQUESTS.c[name] for name in _COLUMNS),
           *(_RUNS.c[name] for name in _RUN_COLUMNS), _VOTE_COUNT.label("votes"))
    .join(_RUNS, _RUNS.c.id == _REQUESTS.c.run_id)
    .where(_REQUESTS.c.ref == bindparam("ref")))
_COPIES = (select(_DELIVERIES.c.id, _DELIVERIES.c.platform, _DELIVERIES.c.channel,
                  _DELIVERIES.c.message_id)
           .where(_DELIVERIES.c.request_id == bindparam("request_id"))
           .order_by(_DELIVERIES.c.id))
"""Hot statements built once (see ``bot.engine.store``)."""


def card_row(session: Session, ref: str) -> CardRow | None:
    """The request ``ref`` as its card shows it, in one statement (None if unknown)."""
    if not ref or len(ref) > store.MAX_REF_CHARS:
        return None  # refs come from payloads: a 5 MB one never reaches a query
    row = store.core(session).execute(_CARD_ROW, {"ref": ref}).first()
    if row is None:
        return None
    fields = row._asdict()
    fields["votes"] = int(fields["votes"] or 0)
    fields["args"] = fields["args"] or {}
    return CardRow(**fields)


def copies(session: Session, request_id: int) -> Sequence[tuple[str, DeliveryRef]]:
    """Every delivered copy of the request as ``(str(delivery id), where it is)``,
    oldest first: the keys ``outbox.applied_versions`` records versions under."""
    rows = store.core(session).execute(_COPIES, {"request_id": request_id})
    return [(str(row.id), DeliveryRef(row.platform, row.channel, row.message_id))
            for row in rows]
