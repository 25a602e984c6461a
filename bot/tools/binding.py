"""Binding an approval to one exact call: a hash of the tool name and canonical JSON.

The engine stores the hash with the request when it asks, and the runtime recomputes
it from the pending call before it runs anything on resume. The basis is what the
model wrote (the call's arguments as a JSON object) plus the admin ``fixed`` values
the call will get, so a changed argument, a changed ``fixed`` value or a renamed tool
all give another hash and nothing runs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pydantic_core import to_jsonable_python

SHORT_CHARS = 12
"""Characters of the hash shown on cards and in the audit."""


def canonical_json(value: Any) -> str:
    """One spelling per value: sorted keys, no spaces, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False, default=str)


def binding_hash(tool: str, args: Mapping[str, Any], fixed: Mapping[str, Any]) -> str:
    """The full SHA-256 hex digest binding ``tool(args)`` with its ``fixed`` values."""
    basis = canonical_json({"tool": tool, "args": dict(args), "fixed": dict(fixed)})
    return hashlib.sha256(basis.encode()).hexdigest()


def short(digest: str | None) -> str:
    """The short form people see (e.g. ``3f9c2a1b0d4e``)."""
    return (digest or "")[:SHORT_CHARS]


def jsonable(value: Any) -> Any:
    """JSON-safe copy of validated arguments (dates, models... become JSON values). Here,
    not in ``guard``, so the engine stores a call without importing pydantic-ai."""
    return to_jsonable_python(value, fallback=str)
