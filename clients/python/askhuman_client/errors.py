"""The API's RFC 9457 problem+json as exceptions, one class per thing a caller handles."""

from __future__ import annotations

from typing import Any

import httpx

PROBLEM_PREFIX = "urn:askhuman:problem:"


class AskHumanError(Exception):
    """The server refused a call; ``type``/``title``/``detail`` are its problem details."""

    def __init__(self, status: int, type: str, title: str, detail: str,
                 problem: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {title}: {detail}")
        self.status = status
        self.type = type
        self.title = title
        self.detail = detail
        self.problem = problem or {}

    @property
    def slug(self) -> str:
        """The kind of problem without the URN prefix (``not-found``, ``rate-limited``…)."""
        return self.type.removeprefix(PROBLEM_PREFIX)


class Unauthorized(AskHumanError):
    """No, unknown or revoked API key (401)."""


class Forbidden(AskHumanError):
    """A route or agent this key may not use (403)."""


class NotFound(AskHumanError):
    """No such request, or not this client's (404)."""


class IdempotencyConflict(AskHumanError):
    """The idempotency key was used before with a different body (409)."""


class AlreadyResolved(AskHumanError):
    """The request was already decided, so it cannot be cancelled or answered (409)."""


class ValidationFailed(AskHumanError):
    """The body, header or ask_human args were refused (422); ``errors`` names the keys."""

    @property
    def errors(self) -> list[dict[str, Any]]:
        found = self.problem.get("errors")
        return list(found) if isinstance(found, list) else []


class RateLimited(AskHumanError):
    """Over the client's rate limit (429) after the client's own retries."""

    def __init__(self, *args: Any, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_after = retry_after


class ServerError(AskHumanError):
    """A 5xx that stayed after the retries."""


_BY_STATUS: dict[int, type[AskHumanError]] = {
    401: Unauthorized, 403: Forbidden, 404: NotFound, 422: ValidationFailed, 429: RateLimited,
}


def retry_after(response: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (askhuman sends whole seconds), or None."""
    raw = response.headers.get("retry-after")
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except ValueError:
        return None


def error_for(response: httpx.Response) -> AskHumanError:
    """The typed exception for an error response (problem+json, or whatever came)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    problem: dict[str, Any] = body if isinstance(body, dict) else {}
    status = response.status_code
    type_ = str(problem.get("type") or "about:blank")
    title = str(problem.get("title") or response.reason_phrase or "Error")
    detail = str(problem.get("detail") or response.text[:500])
    if status == 409:
        cls: type[AskHumanError] = (IdempotencyConflict if type_.endswith("idempotency-conflict")
                                    else AlreadyResolved)
    elif status >= 500:
        cls = ServerError
    else:
        cls = _BY_STATUS.get(status, AskHumanError)
    if cls is RateLimited:
        return RateLimited(status, type_, title, detail, problem, retry_after=retry_after(response))
    return cls(status, type_, title, detail, problem)
