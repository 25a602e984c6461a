"""Turn stored rows into the ``RequestCard`` renderers and adapters work with."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, cast

from pydantic import JsonValue

from bot.askhuman.schema import AskHumanToolArgs
from bot.engine.parsed import ParsedMemo
from renderers.card import CardStatus, RequestCard
from renderers.i18n import DEFAULT_LOCALE, speaking
from renderers.tool_card import tool_approval_args, view_from_json
from renderers.words import Param, Said, platform_name, said


def as_utc(value: dt.datetime | None) -> dt.datetime | None:
    """Stored timestamps are naive UTC; hand out aware ones."""
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def to_db_time(value: dt.datetime) -> dt.datetime:
    """Naive UTC for storage (portable across SQLite and PostgreSQL)."""
    if value.tzinfo is None:
        return value
    return value.astimezone(dt.UTC).replace(tzinfo=None)


_ARGS: ParsedMemo[AskHumanToolArgs] = ParsedMemo(AskHumanToolArgs.model_validate)
"""A request's args are written once; every read of it validated them again."""


class Shown(Protocol):
    """The columns a card shows: a loaded ``HumanRequest`` or a read-only
    ``bot.engine.card_rows.CardRow``."""

    @property
    def ref(self) -> str: ...
    @property
    def args(self) -> Mapping[str, Any]: ...
    @property
    def deadline(self) -> dt.datetime | None: ...
    @property
    def version(self) -> int: ...
    @property
    def status(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def quorum(self) -> int: ...
    @property
    def result(self) -> Mapping[str, Any] | None: ...
    @property
    def tool(self) -> Mapping[str, Any] | None: ...
    @property
    def decided_by_platform(self) -> str | None: ...
    @property
    def decided_by_user(self) -> str | None: ...
    @property
    def decided_by_name(self) -> str | None: ...
    @property
    def decided_at(self) -> dt.datetime | None: ...
    @property
    def decided_via(self) -> str | None: ...
    @property
    def action_id(self) -> str | None: ...
    @property
    def reminded_at(self) -> dt.datetime | None: ...
    @property
    def escalated_at(self) -> dt.datetime | None: ...
    @property
    def escalation_route(self) -> str | None: ...
    @property
    def escalated_routes(self) -> Sequence[str] | None: ...


def build_card(request: Shown, agent: str, votes: int = 0) -> RequestCard:
    """A snapshot of one request as people should see it now."""
    result: Mapping[str, Any] = request.result or {}
    action = result.get("action") or {}
    values = cast(dict[str, JsonValue], result.get("values") or {})
    return RequestCard(
        ref=request.ref,
        args=_ARGS.get(request.ref, request.args),
        agent_name=agent,
        deadline=as_utc(request.deadline),
        version=request.version,
        status=cast(CardStatus, request.status),
        decided_by_id=request.decided_by_user,
        decided_by_name=request.decided_by_name,
        decided_by_platform=request.decided_by_platform,
        decided_at=as_utc(request.decided_at),
        action_id=action.get("id") if request.status == "submitted" else request.action_id,
        action_label=action.get("label"),
        values=values,
        message=result.get("message"),
        votes=votes,
        quorum=request.quorum,
        tool=view_from_json(request.tool) if request.kind == "tool_approval" and request.tool
        else None,
        escalated_to=tuple(reached_routes(request)),
        reminded_at=as_utc(request.reminded_at),
        decided_via_id=request.decided_via,
    )


def reached_routes(request: Shown) -> list[str]:
    """Every escalation route ``request`` reached, in order (older rows: only the one)."""
    if request.escalated_routes:
        return [str(name) for name in request.escalated_routes]
    return [request.escalation_route] if request.escalated_at and request.escalation_route \
        else []


def _decider(request: Shown, viewer: str | None) -> Param:
    platform = request.decided_by_platform
    if not request.decided_by_name and viewer and platform and platform != viewer:
        return said("someone_on", platform=platform_name(platform))
    return request.decided_by_name or request.decided_by_user or said("someone")


def already_decided_message(request: Shown, viewer: str | None = None) -> Said:
    """'Already decided by Alice (Approve) at 2025-01-31 12:00 UTC' and friends.

    ``viewer`` is the platform of the person told: a nameless decider from another
    platform is "someone on Feishu", never a raw id that means nothing there (Feishu
    swaps its own open_ids for names before showing them).
    """
    at = as_utc(request.decided_at)
    when = f"{at:%Y-%m-%d %H:%M UTC}" if at else None
    timed = {"when": when} if when else {}
    result = request.result or {}
    if request.status == "submitted":
        label = (result.get("action") or {}).get("label")
        by = _decider(request, viewer)
        if label:
            return said("decided.by_choice_at" if when else "decided.by_choice", by=by,
                        choice=label, **timed)
        return said("decided.by_at" if when else "decided.by", by=by, **timed)
    if request.status == "timeout":
        return said("closed.timed_out_already_at" if when else "closed.timed_out_already",
                    **timed)
    if request.status == "cancelled":
        return said("closed.cancelled_by_at" if when else "closed.cancelled_by",
                    by=_decider(request, viewer), **timed)
    return said("closed.unreachable_at" if when else "closed.unreachable", **timed)


def output_text(output: JsonValue) -> str:
    """A run's final output as chat text."""
    if output is None:
        return "The agent finished without an answer."
    if isinstance(output, str):
        return output
    import json

    return json.dumps(output, ensure_ascii=False, indent=2)


def localized(card: RequestCard, route: object) -> RequestCard:
    """``card`` in its route's ``locale`` and ``timezone`` (unchanged if the route is
    gone or sets neither)."""
    locale = getattr(route, "locale", None) or card.locale
    zone = getattr(route, "timezone", None)
    if (locale, zone) == (card.locale, card.timezone):
        return card
    return _tool_chrome(dataclasses.replace(card, locale=locale, timezone=zone))


def _tool_chrome(card: RequestCard) -> RequestCard:
    """A tool-approval card's engine-made title, question, reason field and buttons in
    the card's locale (they are stored in ``en``; ids stay the same, so answers and
    clicks map exactly as before). Other cards are model-written: never translated."""
    if card.tool is None or card.locale == DEFAULT_LOCALE:
        return card
    with speaking(card.locale):
        args = tool_approval_args(card.tool, card.agent_name)
    label = card.action_label
    if card.action_id is not None:
        chosen = args.action(card.action_id)
        label = chosen.label if chosen is not None else label
    return dataclasses.replace(card, args=args, action_label=label)
