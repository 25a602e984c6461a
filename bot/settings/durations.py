"""Durations (``"30m"``, ``90``) and spans (a duration, or ``"50%"`` of a timeout), as
route timing keys are written; parsed to seconds, formatted back for error messages."""

from __future__ import annotations

import re

from pydantic import Field

from bot.settings.base import _Strict

DURATION_HINT = 'write a duration like "30m", "2h" or "1d", or a number of seconds'
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: object) -> float:
    """Turn ``"30m"`` / ``"2h"`` / ``"1d"`` / ``90`` into seconds (> 0)."""
    if isinstance(value, bool):
        raise ValueError(DURATION_HINT)
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.match(value)):
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    else:
        raise ValueError(DURATION_HINT)
    if seconds <= 0:
        raise ValueError(f"must be positive; {DURATION_HINT}")
    return seconds


def format_duration(seconds: float) -> str:
    """``1800`` → ``"30m"`` (the shortest exact unit), for error messages."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
SPAN_HINT = f'{DURATION_HINT}, or a percentage of the timeout like "50%"'


class Percent(_Strict):
    """A share of the request's timeout (``"50%"``): resolved per request, so it follows
    the deadline the request actually got."""

    percent: float = Field(gt=0, lt=100)

    def of(self, total: float) -> float:
        return total * self.percent / 100

    def __str__(self) -> str:
        return f"{self.percent:g}%"


Span = float | Percent
"""Seconds, or a percentage of the timeout."""


def parse_span(value: object) -> Span:
    """``"30m"`` / ``90`` → seconds; ``"50%"`` → ``Percent`` (strictly between 0 and 100)."""
    if isinstance(value, Percent):
        return value
    if isinstance(value, dict) and set(value) == {"percent"}:  # a dumped Percent
        return Percent.model_validate(value)
    if isinstance(value, str) and (match := _PERCENT.match(value)):
        percent = float(match.group(1))
        if not 0 < percent < 100:
            raise ValueError(f"a percentage must be between 0% and 100% (got {value.strip()})")
        return Percent(percent=percent)
    try:
        return parse_duration(value)
    except ValueError:
        raise ValueError(SPAN_HINT) from None


def span_seconds(span: Span, timeout: float) -> float:
    """``span`` in seconds for a request that waits ``timeout`` seconds."""
    return span.of(timeout) if isinstance(span, Percent) else float(span)


def describe_span(span: Span) -> str:
    return str(span) if isinstance(span, Percent) else format_duration(span)
