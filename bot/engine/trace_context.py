"""W3C Trace Context (``traceparent``, ``tracestate``): read, check, keep.

The door reads the two headers of a create (``POST /api/v1/requests``, ``/approvals``,
``/runs``, an MCP tool call) with ``from_headers``; what passes the check is stored with
the request or run (``trace_context``, a small JSON object) and becomes the parent of
its spans (``bot.engine.tracing``) and the ``traceparent`` of its webhooks. A malformed
``traceparent`` is ignored, never an error: a request is not refused over its
telemetry. A malformed ``tracestate`` is dropped alone (the spec's rule: it never
invalidates the ``traceparent``). Plain string work, no OpenTelemetry import: this runs
whether tracing is on or not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
MAX_TRACESTATE = 512
"""The spec's limit a vendor must propagate at least; longer ones are dropped."""

_PARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_STATE_MEMBER = re.compile(r"[a-z0-9][a-z0-9_\-*/@]{0,255}=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}")
_ZERO_TRACE, _ZERO_SPAN = "0" * 32, "0" * 16


def valid_traceparent(value: str) -> str | None:
    """``value`` as a version-00 ``traceparent`` if it is a valid one, else None.

    Version ``ff`` and all-zero ids are invalid; a later version's extra fields are cut
    (the spec: parse the first four), so what is stored is always 55 characters.
    """
    match = _PARENT.fullmatch(value.strip())
    if match is None:
        return None
    version, trace_id, span_id, flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest) or trace_id == _ZERO_TRACE \
            or span_id == _ZERO_SPAN:
        return None
    return f"00-{trace_id}-{span_id}-{flags}"


def valid_tracestate(value: str) -> str | None:
    """``value`` if it is a well-formed ``tracestate`` of at most 512 characters."""
    value = value.strip()
    if not value or len(value) > MAX_TRACESTATE:
        return None
    members = [m.strip() for m in value.split(",")]
    if len(members) > 32 or not all(_STATE_MEMBER.fullmatch(m) for m in members if m):
        return None
    return ",".join(m for m in members if m) or None


def from_headers(headers: Mapping[str, str]) -> dict[str, Any] | None:
    """The trace context to keep from request headers (None: none, or malformed)."""
    raw = headers.get(TRACEPARENT)
    parent = valid_traceparent(raw) if raw else None
    if parent is None:
        return None
    kept: dict[str, Any] = {TRACEPARENT: parent}
    state = headers.get(TRACESTATE)
    checked = valid_tracestate(state) if state else None
    if checked is not None:
        kept[TRACESTATE] = checked
    return kept


def as_headers(stored: Mapping[str, Any] | None) -> dict[str, str]:
    """The headers that carry a stored trace context onward ({} for None)."""
    if not stored or not isinstance(stored.get(TRACEPARENT), str):
        return {}
    headers = {TRACEPARENT: str(stored[TRACEPARENT])}
    if isinstance(stored.get(TRACESTATE), str):
        headers[TRACESTATE] = str(stored[TRACESTATE])
    return headers
