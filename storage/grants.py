"""Standing grants: "approve calls like this one for a while", as one row each.

Kept apart from ``storage.models`` only to keep each file short; it shares its
``Base``. A grant is used with a compare-and-set on ``uses`` (``bot.engine.grants``),
so concurrent matching calls on any replica never use more than ``max_uses``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import JSON, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from storage.models import Base, Json


class Grant(Base):
    """Calls of ``tool`` by ``agent`` that satisfy ``scope`` (or have the granted
    call's exact arguments) are approved without a card until ``expires_at``, at most
    ``max_uses`` times, unless revoked."""

    __tablename__ = "grants"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    route: Mapped[str] = mapped_column(String(200))
    """The route the granting request was on (who may see and revoke it)."""
    agent: Mapped[str] = mapped_column(String(200))
    """``runs.agent``: an embedded agent's name, or ``client[/agent]`` for the API."""
    tool: Mapped[str] = mapped_column(String(200))
    scope: Mapped[str | None] = mapped_column(Text)
    """The tool's ``grant_scope`` CEL when granted (None: the exact same arguments)."""
    args: Mapped[Json] = mapped_column(JSON)
    """The granted call's canonical arguments, fixed values included (``call`` in CEL)."""
    binding: Mapped[str] = mapped_column(String(64))
    """The granted call's binding hash (exact-argument grants match on it)."""
    granted_by_platform: Mapped[str] = mapped_column(String(32))
    granted_by_user: Mapped[str] = mapped_column(String(200))
    granted_by_name: Mapped[str] = mapped_column(String(400))
    """Who granted it (several names, comma-separated, for a quorum)."""
    granted_by: Mapped[list[Any] | None] = mapped_column(JSON)
    """Every granting voter: ``[{platform, user_id, name}]``."""
    request_ref: Mapped[str] = mapped_column(String(64), index=True)
    """The request whose decision created the grant."""
    created_at: Mapped[dt.datetime] = mapped_column()
    expires_at: Mapped[dt.datetime] = mapped_column()
    max_uses: Mapped[int] = mapped_column(Integer)
    uses: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    revoked_at: Mapped[dt.datetime | None] = mapped_column()
    revoked_by: Mapped[str | None] = mapped_column(String(400))
    expired_at: Mapped[dt.datetime | None] = mapped_column()
    """When the grant ran out (time or uses) and ``grant_expired`` was audited."""

    __table_args__ = (
        Index("ix_grants_agent_tool", "agent", "tool", "revoked_at", "expires_at"),
        Index("ix_grants_active", "revoked_at", "expired_at", "expires_at"),
    )
