"""The seam between the platform-agnostic engine and each chat platform.

The engine never imports Slack or Feishu code. A platform adapter implements
``PlatformAdapter`` (send, update, reply) and ``Directory`` (who belongs to which
group or chat); the engine calls them *after* its transactions commit, so a slow or
failing platform can never hold a database lock or lose a decision.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import JsonValue

from renderers.card import RequestCard
from renderers.words import Said


@dataclass(frozen=True)
class Identity:
    """A person as a platform vouches for them (a signed callback, a socket event...)."""

    platform: str
    """"slack" | "feishu" | "console" | "api"."""
    user_id: str
    """Slack user id (U…/W…), Feishu open_id (ou_…), console/api user name."""
    display_name: str | None = None
    team: str | None = None
    """Slack: the person's own team id (``user.team_id`` of a click); with ``enterprise``
    it tells a member of this workspace from a Slack Connect guest. None when the payload
    does not say (the Slack directory then asks ``users.info``) and on other platforms."""
    enterprise: str | None = None
    """Slack: the person's Enterprise Grid org id, when the payload says it is theirs."""
    via: str | None = None
    """Set by the engine when a delegate acts for this person (out of office): the
    delegate's own user id on the same platform (``bot.engine.delegation``)."""


@dataclass(frozen=True)
class Origin:
    """Where a run was started, so its final output or failure is posted back there."""

    platform: str
    channel: str | None = None
    """Slack channel id, Feishu chat id; None for console/API runs."""
    thread: str | None = None
    """Slack thread_ts, Feishu message id to reply to."""


@dataclass(frozen=True)
class DeliveryTarget:
    """One recipient chosen by admin configuration (never by the model)."""

    kind: Literal["channel", "user"]
    id: str
    """Channel / chat id, or a user id (Slack U…, Feishu open_id or email)."""


@dataclass(frozen=True)
class DeliveryRef:
    """Where a delivered card lives, so it can be updated for everyone later."""

    platform: str
    channel: str
    """Slack channel id (DM channel for users), Feishu chat id."""
    message_id: str
    """Slack message ts, Feishu message id (om_…)."""
    reused: bool = False
    """True when ``deliver`` found the card an earlier, interrupted try had already
    posted (instead of posting it again): it may show an older version."""


@dataclass(frozen=True)
class PostKey:
    """Names one post the engine asks an adapter for, the same on every retry of it.

    The engine's outbox retries a post whenever it cannot know whether the last try
    reached the platform (the process died during the call, the lease ran out...).
    Adapters use the key to make the post idempotent: Slack stores it in the message's
    ``metadata`` and, on a retry, looks for it before posting again; Feishu derives the
    ``uuid`` idempotency parameter from it.
    """

    id: str
    """Stable across retries, unique per post: e.g. ``result:<run>:<outbox id>``."""
    run_id: str | None = None
    attempt: int = 1
    """The outbox attempt; 1 is the first try, so nothing can have been posted before."""
    since: dt.datetime | None = None
    """When the post was queued (aware UTC): an earlier try cannot be older than this."""

    @property
    def retry(self) -> bool:
        """An earlier try may have posted already: look before posting again."""
        return self.attempt > 1


class DeliveryError(Exception):
    """Delivery failed for good (after the adapter's own retries).

    The engine resolves the request as ``unavailable`` when no target could be reached.
    ``str(exc)`` is the technical detail (the platform's error code), kept for the log
    and the audit; ``reason`` says what happened in words for people and the agent
    (``"askhuman isn't in that chat; an admin must add the bot to it."``), and must
    never quote raw API text. Adapters set it from their platform's error mapping.
    """

    def __init__(
        self, detail: str = "", *, reason: str | None = None, code: str | int | None = None
    ) -> None:
        super().__init__(detail)
        self.reason = reason
        self.code = code


UNDELIVERABLE_REASON = "The chat platform refused the message."
"""What people read when an adapter gave no ``reason`` (or crashed): no raw text."""


def delivery_reason(exc: BaseException) -> str:
    """The words people may read about a failed platform call (never ``str(exc)``)."""
    reason = getattr(exc, "reason", None)
    return reason if isinstance(reason, str) and reason else UNDELIVERABLE_REASON


class PlatformAdapter(Protocol):
    """Outbound side of a platform. Inbound events call the engine directly."""

    platform: str

    async def deliver(
        self, card: RequestCard, target: DeliveryTarget, key: PostKey | None = None
    ) -> DeliveryRef:
        """Post a pending request card; raise ``DeliveryError`` on permanent failure.

        ``key`` names this card for this target; on a retry (``key.retry``) an adapter
        that can find the card an interrupted try posted returns that one instead
        (``DeliveryRef.reused``)."""
        ...

    async def update(self, card: RequestCard, ref: DeliveryRef) -> None:
        """Re-render a delivered card (decided, timed out, cancelled...) for everyone."""
        ...

    async def post_run_result(
        self, origin: Origin, text: str, key: PostKey | None = None
    ) -> None:
        """Post a run's final output or failure where the run started (same thread).

        ``key`` makes the post idempotent where the platform allows (see ``PostKey``)."""
        ...

    # Optional capabilities: the typed protocols below (``bot.engine.platforms`` finds
    # them on an adapter; an adapter without one is skipped for that job).


@runtime_checkable
class Reminding(Protocol):
    """Can remind the people who got a card that it still waits for an answer."""

    async def remind(
        self, card: RequestCard, ref: DeliveryRef, text: str, key: PostKey | None = None
    ) -> None:
        """A short message in the card's thread (Slack ``thread_ts``, a Feishu reply).
        ``text`` is trusted engine text (agent name, deadline), but adapters still
        escape it as plain text. Raise ``DeliveryError`` when the platform refused for
        good; any other error is retried by the outbox. ``key`` makes the reminder
        idempotent like ``post_run_result``'s."""
        ...


@runtime_checkable
class ReadsClicks(Protocol):
    """Stores clicks raw (before the ack, without reading the card) and reads them later."""

    def read_click(self, card: RequestCard, action_id: str, values: Mapping[str, Any]
                   ) -> tuple[str, dict[str, JsonValue]]:
        """A stored click's values as the platform sent them → ``(action id, contract
        values)``; raise ``ValueError`` if unreadable. Without this capability, stored
        values are contract values."""
        ...


@runtime_checkable
class TellsClickers(Protocol):
    """Can tell one person what became of their click after a restart."""

    async def tell_clicker(self, who: Identity, reply_to: Mapping[str, str],
                           words: Said) -> None:
        """``reply_to`` is what the listener stored (e.g. the channel); ``words`` are
        shown in the clicker's locale (``Said.text``). Raise to have it retried."""
        ...


@runtime_checkable
class OpensThreads(Protocol):
    """Runs started here without a thread report into one the adapter opens with a first
    message (Slack: "<starter> started <agent>: <prompt>" for a slash command)."""

    async def open_thread(self, origin: Origin, starter: Identity, agent: str, prompt: str,
                          key: PostKey) -> Origin:
        """Post the run's first message at ``origin`` and return the origin of its
        thread. Idempotent with ``key`` like ``post_run_result`` (a retry finds the
        message an interrupted try posted). ``DeliveryError`` when the platform refused
        for good (the starter is then told the run did not start)."""
        ...


class ClickTraits(Protocol):
    """Plain facts an adapter may declare about its clicks (both default to False).

    ``clicks_name_their_message``: a click carries the id of the message it came from,
    so the engine refuses a click whose message is not a card of the request it names.
    ``updates_cards_after_reply``: the platform shows a card patch only after the
    click's own reply was sent, so the card update after a click's decision runs in
    the background instead of inside the decision (Feishu).
    """

    clicks_name_their_message: bool
    updates_cards_after_reply: bool


class DirectoryUnavailable(Exception):
    """A membership lookup failed and no fresh cached answer exists.

    Directories never fall back to an expired cache entry: authorization then refuses
    with ``bot.engine.authz.UNVERIFIED`` (fail closed), and the next attempt asks again.
    """


@runtime_checkable
class CachedLookups(Protocol):
    """A directory that can answer from its fresh cache alone (a cheap pre-check)."""

    def cached_only(self) -> Directory:
        """The same lookups, answered only from fresh cache entries: a lookup that would
        ask the platform raises ``DirectoryUnavailable`` instead (no network call)."""
        ...


class Directory(Protocol):
    """Membership lookups used to authorize responders and starters.

    One rule for every lookup (members, groups, email → id): a fresh cached answer is
    used; once it has expired the platform is asked, and if that fails the method raises
    ``DirectoryUnavailable`` instead of reusing the stale answer.

    Optional (checked with ``getattr``): ``async def is_external(identity) -> bool`` —
    True for a person from another organisation than the install (Slack Connect), whose
    channel or group membership counts only where the route allows external people;
    raises ``DirectoryUnavailable`` too.
    """

    async def resolve_users(self, users: list[str]) -> set[str]:
        """Map configured user entries (ids, or e.g. emails on Feishu) to platform user ids."""
        ...

    async def group_members(self, group_id: str) -> set[str]:
        """User ids in a user group (Slack usergroup S…; Feishu: unsupported → empty)."""
        ...

    async def chat_members(self, chat_id: str) -> set[str]:
        """User ids in a channel or chat."""
        ...
