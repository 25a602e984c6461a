"""What the engine answers to a click, a cancel or a file attachment."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from renderers.card import RequestCard

Outcome = Literal["accepted", "recorded", "rejected", "already_decided", "not_found"]


@dataclass(frozen=True)
class RespondResult:
    """``message`` is shown to the person who acted (toast, ephemeral message, stderr).

    - ``accepted``: this call made the decision (or cancelled the request).
    - ``recorded``: a vote towards a quorum, or files attached; nothing decided yet.
    - ``rejected``: refused (not allowed, invalid values); the request is unchanged.
    - ``already_decided``: someone (or the timeout) was first; ``card`` shows the outcome.
    - ``not_found``: unknown or malformed reference.
    """

    outcome: Outcome
    message: str
    card: RequestCard | None = None

    @property
    def ok(self) -> bool:
        return self.outcome in ("accepted", "recorded")


class EngineError(Exception):
    """A caller error the engine can explain in one sentence (shown as is)."""


class UnknownAgentError(EngineError, KeyError):
    """``start_run`` named an agent that is not configured."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown agent"


class StartRefusedError(EngineError):
    """``start_run`` refused: the person is not one of the agent's ``starters`` (or their
    membership could not be verified). The message says why and is shown as is."""
