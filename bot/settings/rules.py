"""Routing rules as code (``rules:``): a CEL condition picks the route and may override
some of its settings."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from bot.settings.base import _Strict
from bot.settings.durations import parse_duration


class RoutingRule(_Strict):
    """``rules:`` entry: requests for which ``when`` (CEL over ``agent``, ``tool`` and
    ``args``) is true go to ``route``, with the overrides given here."""

    when: str
    route: str
    quorum: int | None = Field(default=None, ge=1)
    """Distinct approvers needed (default: the route's)."""
    timeout: float | None = Field(default=None, description="seconds")
    """How long the request waits (default: the route's); percentages in the route's
    reminder and escalation follow it."""
    veto: bool | None = None
    """Whether a destructive choice decides at once (default: the route's)."""
    allow_self_approval: bool | None = None
    """Whether the run's starter may answer (default: the route's)."""
    require_reason: list[str] | None = None
    """Action ids that need a reason (default: the route's)."""

    @field_validator("when")
    @classmethod
    def _compiles(cls, v: str) -> str:
        from bot.tools.rules import validated

        return validated(v)

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout(cls, v: object) -> float | None:
        return None if v is None else parse_duration(v)

    def overrides(self) -> dict[str, Any]:
        """The route settings this rule changes."""
        fields = ("quorum", "timeout", "veto", "allow_self_approval", "require_reason")
        return {k: getattr(self, k) for k in fields if getattr(self, k) is not None}
