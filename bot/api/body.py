"""Read a request body under a cap, before anything parses it.

``Content-Length`` over the cap is refused without reading; a body without one
(chunked) is read only up to the cap. Either way the answer is 413 problem+json.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from bot.api.problems import Problem


def too_large_problem(limit: int) -> Problem:
    """413 for a body over ``limit`` (also used by the app-wide cap in ``bot.web``)."""
    return Problem(413, "body-too-large", f"The request body is larger than {limit} bytes.",
                   max_bytes=limit)


async def read_capped(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise Problem(400, "bad-request", "Content-Length is not a number.")
        if int(declared) > limit:
            raise too_large_problem(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large_problem(limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def json_object(request: Request, limit: int, *, optional: bool = False) -> dict[str, Any]:
    """The body as a JSON object (400 if it is not one; ``{}`` when empty and optional)."""
    raw = await read_capped(request, limit)
    if not raw.strip():
        if optional:
            return {}
        raise Problem(400, "bad-request", "The request body must be a JSON object.")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise Problem(400, "bad-json", "The request body is not valid JSON.") from None
    if not isinstance(data, dict):
        raise Problem(400, "bad-request", "The request body must be a JSON object.")
    return data
