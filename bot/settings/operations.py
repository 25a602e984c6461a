"""How ``serve`` runs: HTTP limits (``http:``), the background worker (``worker:``),
Prometheus metrics (``metrics:``) and how long what people said is kept (``retention:``)."""

from __future__ import annotations

from pydantic import Field, field_validator

from bot.settings.base import _Strict
from bot.settings.durations import parse_duration


class HttpSettings(_Strict):
    """The HTTP server (``serve``): limits applied before any endpoint runs."""

    max_body_bytes: int = Field(default=1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    """Larger request bodies get 413 unread (Slack and Feishu send a few KB)."""


class WorkerSettings(_Strict):
    """The background worker of ``serve`` (resumes, timeouts, the outbox)."""

    resume_concurrency: int = Field(default=16, ge=1, le=64)
    """Resume jobs run at once per process, each under its own lease. Model calls are
    I/O, so several in parallel keep one slow model from holding up every other run,
    and under a burst their claims and outcomes share commits (group commit)."""


class RetentionSettings(_Strict):
    """How long what people and agents said is kept (unset: forever, as before).

    Applied by the worker's housekeeping sweep (every 10 minutes) and by
    ``askhuman db prune``. Who decided what and when always stays (until ``audit``).
    """

    answers: float | None = Field(default=None, description="seconds")
    """Remove the values people entered (results, votes, staged files, the
    ``decided`` audit details) this long after a request was decided."""
    transcripts: float | None = Field(default=None, description="seconds")
    """Clear the prompt, message history and output of a finished run (and its
    posted result text in the outbox) this long after it ended."""
    audit: float | None = Field(default=None, description="seconds")
    """Delete audit rows last seen longer ago than this."""

    @field_validator("answers", "transcripts", "audit", mode="before")
    @classmethod
    def _duration(cls, v: object) -> float | None:
        return None if v is None else parse_duration(v)


class MetricsSettings(_Strict):
    """Prometheus ``/metrics`` (off by default)."""

    enabled: bool = False
    port: int | None = Field(default=None, ge=1, le=65535)
    """Serve ``/metrics`` on its own port instead of the main app's."""
    host: str = "127.0.0.1"
    """Address of the separate metrics port (``0.0.0.0`` for a scraper elsewhere)."""
