"""Query parameters read exactly as the OpenAPI document types them.

``int()`` and ``float()`` take more than JSON numbers (``" 5"``, ``"5_0"``, ``"inf"``,
``"nan"``); a parameter typed ``integer`` or ``number`` in the document takes only
what that type means, so a value a generated client would never send is refused.
"""

from __future__ import annotations

import re

_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]{0,17})")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]{0,17})(?:\.[0-9]{1,17})?(?:[eE][+-]?[0-9]{1,3})?")


def query_integer(raw: str) -> int | None:
    """``raw`` as a JSON integer, or None if it is not one."""
    return int(raw) if _INTEGER.fullmatch(raw) else None


def query_number(raw: str) -> float | None:
    """``raw`` as a finite JSON number, or None if it is not one."""
    return float(raw) if _NUMBER.fullmatch(raw) else None
