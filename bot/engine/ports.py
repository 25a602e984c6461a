"""The seam between the platform-agnostic engine and each chat platform.

The engine never imports Slack or Feishu code. A platform adapter implements
``PlatformAdapter`` (send, update, reply) and ``Directory`` (who belongs to which
group or chat); the engine calls them *after* its transactions commit, so a slow or
failing platform can never hold a database lock or lose a decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from renderers.card import RequestCard


@dataclass(frozen=True)
class Identity:
    """A person as a platform vouches for them (a signed callback, a socket event...)."""

    platform: str
    """"slack" | "feishu" | "console" | "api"."""
    user_id: str
    """Slack user id (U…/W…), Feishu open_id (ou_…), console/api user name."""
    display_name: str | None = None


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


class DeliveryError(Exception):
    """Delivery failed for good (after the adapter's own retries).

    The engine resolves the request as ``unavailable`` when no target could be reached.
    """


class PlatformAdapter(Protocol):
    """Outbound side of a platform. Inbound events call the engine directly."""

    platform: str

    async def deliver(self, card: RequestCard, target: DeliveryTarget) -> DeliveryRef:
        """Post a pending request card; raise ``DeliveryError`` on permanent failure."""
        ...

    async def update(self, card: RequestCard, ref: DeliveryRef) -> None:
        """Re-render a delivered card (decided, timed out, cancelled...) for everyone."""
        ...

    async def post_run_result(self, origin: Origin, text: str) -> None:
        """Post a run's final output or failure where the run started (same thread)."""
        ...

    # Optional (the engine checks with ``getattr`` and skips adapters without it):
    #
    # async def remind(self, card: RequestCard, ref: DeliveryRef, text: str) -> None:
    #     """Remind the people who got the card ``ref`` that it still waits for an
    #     answer: a short message in the card's thread (Slack ``thread_ts``, a Feishu
    #     reply). ``text`` is trusted engine text (agent name, deadline), but adapters
    #     still escape it as plain text. Raise ``DeliveryError`` when the platform
    #     refused for good; any other error is retried by the outbox."""
    #
    # def read_click(self, card: RequestCard, action_id: str, values: Mapping[str, Any]
    #                ) -> tuple[str, dict[str, JsonValue]]:
    #     """A stored click's values as the platform sent them (stored before the ack,
    #     without reading the card) → ``(action id, contract values)``; raise
    #     ``ValueError`` if unreadable. Without it, stored values are contract values."""
    #
    # async def tell_clicker(self, who: Identity, reply_to: Mapping[str, str],
    #                        text: str) -> None:
    #     """Tell one person what became of their click when the worker decided it
    #     (after a restart): ``reply_to`` is what the listener stored (e.g. the channel).
    #     Raise to have it retried."""


class Reminding(Protocol):
    """The optional ``remind`` method of a ``PlatformAdapter`` (see above)."""

    async def remind(self, card: RequestCard, ref: DeliveryRef, text: str) -> None: ...


class Directory(Protocol):
    """Membership lookups used to authorize responders; implementations cache with a TTL."""

    async def resolve_users(self, users: list[str]) -> set[str]:
        """Map configured user entries (ids, or e.g. emails on Feishu) to platform user ids."""
        ...

    async def group_members(self, group_id: str) -> set[str]:
        """User ids in a user group (Slack usergroup S…; Feishu: unsupported → empty)."""
        ...

    async def chat_members(self, chat_id: str) -> set[str]:
        """User ids in a channel or chat."""
        ...
