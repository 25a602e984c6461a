"""What the engine answers to a click, a cancel or a file attachment."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from renderers.card import RequestCard
from renderers.words import Said, said, verbatim

Outcome = Literal["accepted", "recorded", "rejected", "already_decided", "not_found"]

NOT_FOUND = said("request.not_found")
"""What an unknown (or mistyped, or outdated) request reference is answered."""


@dataclass(frozen=True)
class RespondResult:
    """``words`` are shown to the person who acted (toast, ephemeral message, stderr),
    in their locale (``renderers.words``); ``message`` is the English text.

    - ``accepted``: this call made the decision (or cancelled the request).
    - ``recorded``: a vote towards a quorum, or files attached; nothing decided yet.
    - ``rejected``: refused (not allowed, invalid values); the request is unchanged.
    - ``already_decided``: someone (or the timeout) was first; ``card`` shows the outcome.
    - ``not_found``: unknown or malformed reference.
    """

    outcome: Outcome
    words: Said
    card: RequestCard | None = None
    tell: bool = False
    """The words add what the updated card does not show (the standing grant an answer
    made, or why none was made): tell the clicker even when the answer was taken."""

    @property
    def message(self) -> str:
        """The words in English (logs, audit rows, the API, the CLI)."""
        return str(self.words)

    @property
    def ok(self) -> bool:
        return self.outcome in ("accepted", "recorded")


@dataclass(frozen=True)
class PendingPage:
    """One page of the open requests a person may answer (oldest first)."""

    cards: list[RequestCard]
    total: int
    """How many open requests this person may answer, on every page together."""
    page: int
    """1-based; a page past the end is clamped to the last one."""
    per_page: int
    routes: Mapping[str, str] = field(default_factory=dict)
    """Each card's route (ref → route name), for lists grouped by route."""

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.per_page))

    @property
    def first(self) -> int:
        """The 1-based position of ``cards[0]`` among all ``total`` (0 when empty)."""
        return (self.page - 1) * self.per_page + 1 if self.cards else 0


class EngineError(Exception):
    """A caller error the engine can explain in one sentence (shown as is); raised with
    its words (a ``Said``) or, from callers that only speak English, a text."""

    @property
    def words(self) -> Said:
        """The sentence, for a person in their locale."""
        first = self.args[0] if self.args else None
        return first if isinstance(first, Said) else verbatim(str(self))


class UnknownAgentError(EngineError, KeyError):
    """``start_run`` named an agent that is not configured."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown agent"


class StartRefusedError(EngineError):
    """``start_run`` refused: the person is not one of the agent's ``starters`` (or their
    membership could not be verified). The message says why and is shown as is."""


@dataclass(frozen=True)
class GrantView:
    """A standing grant as people see it (``askhuman grants``, chat listings)."""

    id: int
    label: str
    """"G-7": how people name it."""
    route: str
    agent: str
    tool: str
    scope: str | None
    """The CEL the grant matches with (None: the exact same arguments)."""
    args: dict[str, Any]
    """The granted call's arguments (``call`` in the scope)."""
    granted_by: str
    created_at: dt.datetime
    expires_at: dt.datetime
    """Aware UTC."""
    max_uses: int
    uses: int
    revoked_at: dt.datetime | None = None
    expired_at: dt.datetime | None = None
    request_ref: str = ""

    @property
    def uses_left(self) -> int:
        return max(0, self.max_uses - self.uses)

    @property
    def active(self) -> bool:
        """Not revoked, not used up, not marked expired (time is checked by the engine)."""
        return self.revoked_at is None and self.expired_at is None and self.uses_left > 0
