"""Schemathesis hooks for ``test_schemathesis.py`` (loaded via ``SCHEMATHESIS_HOOKS``).

A valid ``wait`` (0-60 s) on a pending request long-polls for that long, which would
spend the test's time budget on sleeping. Any valid wait is cut to 0.2 s before the
call: it stays valid, so what is checked does not change; out-of-range or
non-numeric waits (negative tests) are sent as generated.
"""

from __future__ import annotations

from typing import Any

import schemathesis

SHORT_WAIT = 0.2


@schemathesis.hook
def before_call(context: schemathesis.HookContext, case: schemathesis.Case,
                kwargs: dict[str, Any]) -> None:
    wait = (case.query or {}).get("wait")
    if isinstance(wait, bool) or not isinstance(wait, int | float | str):
        return
    try:
        seconds = float(wait)
    except ValueError:
        return
    if SHORT_WAIT < seconds <= 60:
        case.query["wait"] = SHORT_WAIT
