"""The inboxes: what a platform sent, stored *before* it was acknowledged (clicks and
run starts), and worked off from the row. Kept apart from ``storage.models`` (the
lifecycle's tables) only to keep each file short; both share its ``Base``."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import JSON, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from storage.models import Base, Json


class ClickInbox(Base):
    """A click (or form submit) recorded *before* the platform was told "got it".

    Platforms never resend an acknowledged click, so the listener stores it here first
    (one group-committed insert), then acks, then decides from the row. The decision
    marks the row done in its own transaction, so a row is decided exactly once; a row
    left behind by a crash is claimed again after its lease and decided by a worker.
    ``state`` is running (born claimed by the listener) | queued (retry later) →
    telling (decided; the clicker still has to be told) → done | failed.
    """

    __tablename__ = "click_inbox"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    platform: Mapped[str] = mapped_column(String(32))
    kind: Mapped[str] = mapped_column(String(16))
    """respond (a button) | attach (files submitted for file fields)."""
    ref: Mapped[str] = mapped_column(String(64), index=True)
    user_id: Mapped[str] = mapped_column(String(200))
    display_name: Mapped[str | None] = mapped_column(String(200))
    team: Mapped[str | None] = mapped_column(String(64))
    enterprise: Mapped[str | None] = mapped_column(String(64))
    """The clicker's own Slack team / Enterprise Grid (Slack Connect checks)."""
    action_id: Mapped[str] = mapped_column(String(200))
    values: Mapped[Json] = mapped_column(JSON)
    """The values as read from the payload (size-capped, validated only when deciding)."""
    reply_to: Mapped[Json] = mapped_column(JSON, default=dict)
    """Where the clicker can be told the outcome (channel, message), platform-specific."""
    received_at: Mapped[dt.datetime] = mapped_column()
    """When the click was recorded: what the request's deadline is compared with."""
    state: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[dt.datetime] = mapped_column()
    lease_until: Mapped[dt.datetime | None] = mapped_column()
    claim_token: Mapped[str | None] = mapped_column(String(64))
    holder: Mapped[str | None] = mapped_column(String(64))
    """The ``instances`` row of the process holding the lease: a dead holder's rows are
    taken over as soon as its heartbeat goes stale, without waiting out the lease."""
    outcome: Mapped[str | None] = mapped_column(String(32))
    message: Mapped[str | None] = mapped_column(Text)
    """What the clicker was (or is to be) told."""
    last_error: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[dt.datetime] = mapped_column()

    __table_args__ = (Index("ix_click_inbox_state_next", "state", "next_attempt_at"),)


class RunStart(Base):
    """A run start (``/askhuman run``, a mention, a chat message) recorded *before* the
    platform was told "started".

    The listener stores it first (one group-committed insert, the run id chosen up
    front), then acks, then runs the first leg from the row. The row is born claimed by
    the listener (``running`` with a lease its heartbeat renews) and ends ``done`` in the
    transaction that stores the first leg's outcome (a compare-and-set on
    ``claim_token``), so a start runs exactly once; a row left behind by a crash is
    claimed again after its lease by a worker. ``state`` is running | queued (retry
    later) → done | failed (could not start; the starter was told).
    """

    __tablename__ = "run_starts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(64), unique=True)
    """The run's id, chosen when the start was stored (the ``runs`` row is made later)."""
    agent: Mapped[str] = mapped_column(String(200))
    prompt: Mapped[str] = mapped_column(Text)
    started_by_platform: Mapped[str] = mapped_column(String(32))
    started_by_user: Mapped[str] = mapped_column(String(200))
    started_by_name: Mapped[str | None] = mapped_column(String(200))
    started_by_team: Mapped[str | None] = mapped_column(String(64))
    started_by_enterprise: Mapped[str | None] = mapped_column(String(64))
    origin_platform: Mapped[str] = mapped_column(String(32))
    origin_channel: Mapped[str | None] = mapped_column(String(200))
    origin_thread: Mapped[str | None] = mapped_column(String(200))
    """None until the run has a thread (a Slack slash command's "started" message)."""
    state: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[dt.datetime] = mapped_column()
    lease_until: Mapped[dt.datetime | None] = mapped_column()
    claim_token: Mapped[str | None] = mapped_column(String(64))
    holder: Mapped[str | None] = mapped_column(String(64))
    """The ``instances`` row of the process holding the lease: a dead holder's rows are
    taken over as soon as its heartbeat goes stale, without waiting out the lease."""
    outcome: Mapped[str | None] = mapped_column(String(32))
    """started | failed (the first leg failed: told in the thread) | refused |
    unavailable | gave_up | abandoned (the starter was told it did not start)."""
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column()
    updated_at: Mapped[dt.datetime] = mapped_column()

    __table_args__ = (Index("ix_run_starts_state_next", "state", "next_attempt_at"),)
