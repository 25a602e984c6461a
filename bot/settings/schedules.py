"""Schedules (``schedules:``): start an agent on a prompt whenever a cron expression
fires."""

from __future__ import annotations

from pydantic import field_validator

from bot.settings.base import _Strict


class ScheduleSettings(_Strict):
    """Start ``agent`` on ``prompt`` whenever ``cron`` fires (UTC), once across replicas."""

    cron: str
    agent: str
    prompt: str
    route: str | None = None
    """Where the final answer is posted (default: the agent's route)."""
    catch_up: bool = True
    """After downtime, fire once for the missed time(s) (the latest one)."""

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str) -> str:
        from croniter import croniter

        if not croniter.is_valid(v):
            raise ValueError('write a cron expression like "*/15 * * * *" (minute hour day '
                             'month weekday, UTC)')
        return v
