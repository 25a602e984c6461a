"""The rules a request is held to, frozen when it is raised.

A request's route decides who may answer, how many must agree (``quorum``), whether a
destructive choice ends it at once (``veto``), which groups must sign off
(``require``), which actions need a reason (``require_reason``) and how long it waits.
Those rules are copied into ``human_requests.policy`` in the transaction that creates
the request (``freeze``), so editing or reloading the config never changes the rules
of requests already open.

The rest of the engine asks ``of(request, settings)`` for a request's ``Policy`` and
never reads ``settings.routes[request.route]`` for an open request: a request stored
before the ``0010_policy`` migration has no frozen copy and gets the live route.

Deciding with several people (``verdict``) works on ``Ballot``s: one per person, where
a person is ``people:<name>`` for identities mapped under the top-level ``people`` key
(one person on Slack and Feishu votes once) or ``<platform>:<user id>`` otherwise.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import ValidationError
from sqlalchemy.orm import Session

from bot.askhuman.schema import ParagraphField
from bot.engine import store
from bot.engine.parsed import ParsedMemo
from bot.engine.ports import Directory, Identity
from bot.settings import RouteSettings, Settings, SignOff
from renderers import i18n
from renderers.card import RequestCard
from storage import HumanRequest, Vote

log = logging.getLogger("askhuman.engine")

FORMAT = 1
"""Version of the stored JSON (``to_json``)."""
REASON_FIELD = "reason"
"""The field that carries a required reason (the tool-approval card has one already)."""
FALLBACK_REASON_FIELD = "askhuman_reason"
"""Used when the agent's own form has a non-paragraph field called ``reason``."""


@dataclass(frozen=True)
class Policy:
    """One request's rules: its whole effective route as it was when it was raised."""

    route_name: str
    route: RouteSettings
    escalations: Mapping[str, RouteSettings] = dataclasses.field(default_factory=dict)
    """The routes it may escalate to (or notify), as they were."""
    reason_field: str | None = None
    """The field a required reason is read from (None: no action needs one)."""
    frozen: bool = True
    """False: the live route of a request stored before policies were frozen."""

    @property
    def quorum(self) -> int:
        return self.route.quorum

    @property
    def veto(self) -> bool:
        return self.route.veto

    @property
    def require(self) -> list[SignOff]:
        return self.route.require

    @property
    def require_reason(self) -> list[str]:
        return self.route.require_reason

    @property
    def allow_self_approval(self) -> bool:
        return self.route.allow_self_approval

    @property
    def needed(self) -> int:
        """How many approvals the card counts towards (quorum, or one per group)."""
        return max(self.quorum, len(self.require))

    @classmethod
    def from_route(cls, name: str, route: RouteSettings, settings: Settings | None = None,
                   reason_field: str | None = None) -> Policy:
        """The policy a request raised on ``route`` now gets (``settings`` supplies the
        routes it escalates to)."""
        routes = settings.routes if settings is not None else {}
        escalations = {target: routes[target] for target in _linked_routes(route)
                       if target in routes}
        field = reason_field if route.require_reason else None
        return cls(name, route, escalations, field)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "route_name": self.route_name,
                "route": self.route.model_dump(mode="json"),
                "escalations": {k: v.model_dump(mode="json")
                                for k, v in self.escalations.items()},
                "reason_field": self.reason_field}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Policy:
        """Raises ``ValueError`` (incl. pydantic's) for a copy this version cannot read."""
        route = RouteSettings.model_validate(data["route"])
        escalations = {str(k): RouteSettings.model_validate(v)
                       for k, v in (data.get("escalations") or {}).items()}
        field = data.get("reason_field")
        return cls(str(data["route_name"]), route, escalations,
                   str(field) if field else None)

    def route_named(self, name: str, settings: Settings) -> RouteSettings | None:
        """``name`` as this request knows it: its own route or a linked one as frozen,
        any other route live (None if gone)."""
        if name == self.route_name:
            return self.route
        return self.escalations.get(name) or settings.routes.get(name)

    def shown(self) -> dict[str, Any]:
        """What ``askhuman requests show`` prints."""
        return {"source": "frozen when the request was raised" if self.frozen else
                "current route configuration (stored before policies were frozen)",
                "route": self.route_name, "quorum": self.quorum, "veto": self.veto,
                "require": [s.model_dump(mode="json", exclude_none=True)
                            for s in self.require],
                "require_reason": list(self.require_reason),
                "allow_self_approval": self.allow_self_approval,
                "reason_field": self.reason_field,
                "rules": self.route.model_dump(mode="json", exclude_none=True),
                "escalations": {k: v.model_dump(mode="json", exclude_none=True)
                                for k, v in self.escalations.items()}}


def _linked_routes(route: RouteSettings) -> list[str]:
    """Routes ``route`` hands requests to: its escalation(s) and timeout notice.

    Tolerates one escalation or a chain (a list), and ``on_timeout.notify``."""
    raw: Any = getattr(route, "escalation", None)
    steps = raw if isinstance(raw, list) else [raw] if raw is not None else []
    names = [getattr(step, "route", None) for step in steps]
    notify = getattr(getattr(route, "on_timeout", None), "notify", None)
    return [n for n in [*names, notify] if isinstance(n, str)]


_FROZEN: ParsedMemo[Policy] = ParsedMemo(Policy.from_json)
"""A request's policy is written once; every read of it (several per click) parsed it."""


class Ruled(Protocol):
    """What a request's rules and responses are read from: a loaded ``HumanRequest`` or
    a read-only ``bot.engine.card_rows.CardRow``."""

    @property
    def id(self) -> int: ...
    @property
    def ref(self) -> str: ...
    @property
    def route(self) -> str: ...
    @property
    def args(self) -> Mapping[str, Any]: ...
    @property
    def policy(self) -> Mapping[str, Any] | None: ...


def of(request: Ruled, settings: Settings) -> Policy | None:
    """THE way to get a request's rules: the frozen copy, else (a request stored before
    0010_policy, or a copy this version cannot read) the live route; None when neither
    exists."""
    if request.policy:
        try:
            return _FROZEN.get(request.ref, request.policy)
        except (KeyError, TypeError, ValueError, ValidationError):
            log.warning("unreadable frozen policy; using the live route",
                        extra={"ref": request.ref})
    route = settings.routes.get(request.route)
    if route is None:
        return None
    live = Policy.from_route(request.route, route, settings, _existing_reason(request))
    return dataclasses.replace(live, frozen=False)


def may_have_votes(rules: Policy | None) -> bool:
    """Whether a pending request under ``rules`` can hold votes already. Under frozen
    rules where one vote of anyone decides (quorum 1, no sign-off groups) the first
    vote resolves the request in its own transaction, so a pending one has none and a
    decision need not read them (one statement less inside the write lock). Live or
    unknown rules may have been stricter when earlier votes were cast: read them."""
    return rules is None or not rules.frozen or rules.quorum > 1 or bool(rules.require)


def route_of(request: HumanRequest, settings: Settings) -> RouteSettings | None:
    found = of(request, settings)
    return found.route if found is not None else None


def _existing_reason(request: Ruled) -> str | None:
    names = [f.get("name") for f in (request.args or {}).get("fields") or []]
    return REASON_FIELD if REASON_FIELD in names else None


def freeze(request: HumanRequest, settings: Settings, route_name: str,
           route: RouteSettings | None = None) -> Policy:
    """Store ``route``'s rules with a new request (in its creating transaction). When an
    action needs a reason, the card gets a Reason field unless it has one already."""
    route = route or settings.routes[route_name]
    field = None
    if route.require_reason:
        field, args = _with_reason_field(request.args, route)
        request.args = args
    policy = Policy.from_route(route_name, route, settings, field)
    request.policy = policy.to_json()
    return policy


def _with_reason_field(args: dict[str, Any], route: RouteSettings
                       ) -> tuple[str, dict[str, Any]]:
    """The paragraph field a reason goes in: the form's own ``reason`` if it is one,
    else a new optional field under the first free name."""
    fields = list(args.get("fields") or [])
    kinds = {f.get("name"): f.get("type") for f in fields}
    names = (REASON_FIELD, FALLBACK_REASON_FIELD,
             *(f"{FALLBACK_REASON_FIELD}_{n}" for n in range(2, len(fields) + 3)))
    name = next(n for n in names if kinds.get(n, "paragraph") == "paragraph")
    if name in kinds:
        return name, args
    with i18n.speaking(route.locale):
        extra = ParagraphField(name=name, label=i18n.t("reason_label"),
                               placeholder=i18n.t("reason_placeholder"))
    return name, {**args, "fields": [*fields, extra.model_dump(mode="json")]}


def reason_missing(policy: Policy | None, action_id: str, values: Mapping[str, Any]) -> bool:
    """Whether ``action_id`` needs a reason and ``values`` carry none. A card without a
    reason field (raised before the rule existed) never asks for one it cannot take.
    ``require_reason: [approve]`` covers the whole approve family (Approve and allow
    similar…, Edit and approve): another button is no way around the rule."""
    if policy is None or policy.reason_field is None or (
            action_id not in policy.require_reason
            and approval_family(action_id) not in policy.require_reason):
        return False
    text = values.get(policy.reason_field)
    return not (isinstance(text, str) and text.strip())


# ---------------------------------------------------------------- who a voter is


@dataclass(frozen=True)
class Voter:
    person: str
    """``people:<name>`` or ``<platform>:<user id>``."""
    signoff: tuple[int, ...] = ()
    """Indexes of the ``require`` groups the voter belongs to."""


DirectoryOf = Callable[[str], Directory | None]


async def voter(policy: Policy | None, settings: Settings, who: Identity,
                directories: DirectoryOf) -> Voter:
    """Who ``who`` counts as, and which sign-off groups they are in. Raises
    ``DirectoryUnavailable`` when a needed lookup fails (the click is refused).
    A request one vote decides needs neither, so no lookup is made for it."""
    if policy is not None and policy.needed <= 1 and not policy.require:
        return Voter(f"{who.platform}:{who.user_id}")
    name = await person_of(settings, who, directories(who.platform))
    idents = identities(settings, name, who)
    groups: list[int] = []
    for index, signoff in enumerate(policy.require if policy else []):
        if await _member(signoff, settings, idents, directories):
            groups.append(index)
    person = f"people:{name}" if name else f"{who.platform}:{who.user_id}"
    return Voter(person, tuple(groups))


async def person_of(settings: Settings, who: Identity, directory: Directory | None
                    ) -> str | None:
    """The ``people`` entry ``who`` is (ids match directly; Feishu emails are resolved)."""
    lookup: dict[str, str] = {}
    for name, person in settings.people.items():
        ident = person.on(who.platform)
        if ident == who.user_id:
            return name
        if ident and "@" in ident:
            lookup[ident] = name
    if lookup and directory is not None:
        for email, name in lookup.items():
            if who.user_id in await directory.resolve_users([email]):
                return name
    return None


def identities(settings: Settings, name: str | None, who: Identity) -> list[Identity]:
    """``who`` plus the same person's identities on other platforms."""
    out = [who]
    person = settings.people.get(name) if name else None
    for platform, ident in person.identities() if person else []:
        if (platform, ident) != (who.platform, who.user_id):
            out.append(Identity(platform, ident, who.display_name))
    return out


async def _member(signoff: SignOff, settings: Settings, idents: Sequence[Identity],
                  directories: DirectoryOf) -> bool:
    for ident in idents:
        directory = directories(ident.platform)
        if signoff.group is not None:
            # a user group (Slack S…); other platforms' directories have none
            if directory is not None and \
                    ident.user_id in await directory.group_members(signoff.group):
                return True
            continue
        entries = _expand(signoff.users, settings, ident.platform)
        if ident.user_id in entries:
            return True
        emails = [e for e in entries if "@" in e]
        if emails and directory is not None and \
                ident.user_id in await directory.resolve_users(emails):
            return True
    return False


def _expand(users: Sequence[str], settings: Settings, platform: str) -> list[str]:
    """``users`` with names under ``people`` replaced by their id on ``platform``."""
    out: list[str] = []
    for entry in users:
        person = settings.people.get(entry)
        ident = person.on(platform) if person is not None else entry
        if ident:
            out.append(ident)
    return out


async def is_signer(policy: Policy | None, settings: Settings, who: Identity,
                    directories: DirectoryOf) -> bool:
    """Whether ``who`` is in one of the route's sign-off groups (they may answer)."""
    if policy is None or not policy.require:
        return False
    return bool((await voter(policy, settings, who, directories)).signoff)


# ---------------------------------------------------------------- deciding


@dataclass(frozen=True)
class Ballot:
    person: str
    name: str
    action_id: str
    label: str
    signoff: tuple[int, ...]
    reason: str | None = None


Verdict = Literal["wait", "decide", "veto"]


def ballots(session: Session, request: Ruled, policy: Policy | None) -> list[Ballot]:
    """Every response so far, oldest first, one per person."""
    return ballots_of(store.votes_of(session, request.id), request, policy)


def ballots_of(rows: Sequence[Vote], request: Ruled, policy: Policy | None
               ) -> list[Ballot]:
    """``ballots`` of responses already read (oldest first)."""
    labels = _labels(request.args)
    field = policy.reason_field if policy else None
    out: list[Ballot] = []
    for row in rows:
        reason = (row.values or {}).get(field) if field else None
        out.append(Ballot(row.person or f"{row.platform}:{row.user_id}",
                          row.display_name or row.user_id, row.action_id,
                          labels.get(row.action_id, row.action_id),
                          tuple(row.signoff or ()),
                          reason if isinstance(reason, str) and reason.strip() else None))
    return out


def _labels(args: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(a.get("id")): str(a.get("label")) for a in (args or {}).get("actions") or []}


def style_of(args: Mapping[str, Any] | None, action_id: str) -> str:
    for action in (args or {}).get("actions") or []:
        if action.get("id") == action_id:
            return str(action.get("style") or "default")
    return "default"


APPROVALS = frozenset({"approve", "approve_edit", "approve_grant"})
"""A tool approval's approve-family choices: on a quorum they count together."""


def approval_family(action_id: str) -> str:
    """``approve`` for any approve-family choice, else the choice itself."""
    return "approve" if action_id in APPROVALS else action_id


def verdict(policy: Policy, votes: Sequence[Ballot], action_id: str, style: str,
            together: frozenset[str] = frozenset()) -> Verdict:
    """Whether the latest choice (``action_id``) decides the request.

    A destructive choice decides at once unless ``veto: false``; any other needs
    ``quorum`` distinct people choosing it and, with ``require``, one of them from
    each group (a person in two groups counts for one). Choices in ``together`` count
    as one (a tool approval's approve family: Approve, Approve and allow similar…,
    Edit and approve)."""
    if style == "destructive" and policy.veto:
        return "veto"
    family = together if action_id in together else frozenset({action_id})
    same = [b for b in votes if b.action_id in family]
    if len({b.person for b in same}) < policy.quorum:
        return "wait"
    if policy.require and len(matching(len(policy.require), same)) < len(policy.require):
        return "wait"
    return "decide"


def matching(groups: int, votes: Sequence[Ballot]) -> dict[int, int]:
    """A largest assignment of groups to distinct voters (group → ballot index):
    Kuhn's augmenting paths, fine for the handful of groups a route has."""
    owner: dict[int, int] = {}  # ballot index → group

    def place(group: int, seen: set[int]) -> bool:
        for index, ballot in enumerate(votes):
            if group not in ballot.signoff or index in seen:
                continue
            seen.add(index)
            if index not in owner or place(owner[index], seen):
                owner[index] = group
                return True
        return False

    for group in range(groups):
        place(group, set())
    return {group: index for index, group in owner.items()}


def summary(votes: Sequence[Ballot], decided: Verdict) -> str:
    """The result's ``message``: every responder and their choice (and reason)."""
    parts = [f"{b.name} ({b.label}{': ' + b.reason if b.reason else ''})" for b in votes]
    head = "Vetoed" if decided == "veto" else "Decided"
    last = votes[-1] if votes else None
    by = f" by {last.name} ({last.label})" if last is not None and decided == "veto" else ""
    return f"{head}{by}. Responses: {', '.join(parts)}."


def signed_off(policy: Policy | None, votes: Sequence[Ballot]) -> tuple[tuple[str, bool], ...]:
    """(group name, signed off) for the card, counting approvals (non-destructive
    choices, a tool approval's approve family as one); each person signs for one group."""
    if policy is None or not policy.require:
        return ()
    best: dict[int, int] = {}
    for action in dict.fromkeys(approval_family(b.action_id) for b in votes):
        got = matching(len(policy.require),
                       [b for b in votes if approval_family(b.action_id) == action])
        if len(got) > len(best):
            best = got
    return tuple((group_name(s, i), i in best) for i, s in enumerate(policy.require))


def group_name(signoff: SignOff, index: int) -> str:
    return signoff.name or signoff.group or f"group {index + 1}"


def with_progress(session: Session, request: Ruled, card: RequestCard,
                  policy: Policy | None) -> RequestCard:
    """``card`` with who answered what so far and which groups signed off."""
    if policy is None or (policy.needed <= 1 and not policy.require):
        return card
    votes = ballots(session, request, policy)
    return dataclasses.replace(
        card, quorum=policy.needed, votes=len(votes),
        responses=tuple((b.name, b.label) for b in votes),
        signoffs=signed_off(policy, votes))

