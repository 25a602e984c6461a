"""RFC 9457 problem details: every API error is ``application/problem+json``.

Handlers raise ``Problem``; the routes turn it into a response. ``type`` is a URN
per kind of problem (stable, for programs), ``title`` a short summary for people,
``detail`` the specific explanation (for bad ask_human args: Dify's exact text).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse

MEDIA_TYPE = "application/problem+json"
TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Content too large",
    422: "Unprocessable content",
    429: "Too many requests",
    500: "Internal server error",
    503: "Service unavailable",
}


class Problem(Exception):
    """An API error; ``slug`` names its kind (``urn:askhuman:problem:<slug>``)."""

    def __init__(
        self, status: int, slug: str, detail: str, *, headers: Mapping[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.slug = slug
        self.detail = detail
        self.headers = dict(headers or {})
        self.extra = extra

    def body(self, instance: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": f"urn:askhuman:problem:{self.slug}",
            "title": TITLES.get(self.status, "Error"),
            "status": self.status,
            "detail": self.detail,
        }
        if instance:
            body["instance"] = instance
        body.update(self.extra)
        return body

    def response(self, instance: str | None = None) -> JSONResponse:
        return JSONResponse(self.body(instance), status_code=self.status, headers=self.headers,
                            media_type=MEDIA_TYPE)


def unauthorized(detail: str) -> Problem:
    return Problem(401, "unauthorized", detail,
                   headers={"WWW-Authenticate": 'Bearer realm="askhuman"'})
