"""What every settings section builds on: a strict, frozen model (unknown keys are
errors) and the error that names the nested key a problem is about."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class KeyPathError(ValueError):
    """A problem with a nested key: ``key`` (e.g. ``"escalation.route"``) is appended to
    the location pydantic reports, so the message names the exact key to fix."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(message)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
