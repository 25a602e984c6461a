"""Standing grants: approve calls like an approved one, for a while and a number of uses.

Revision ID: 0016_grants
Revises: 0015_rate_limits
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0016_grants"
down_revision: str | None = "0015_rate_limits"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "grants",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("route", sa.String(length=200), nullable=False),
        sa.Column("agent", sa.String(length=200), nullable=False),
        sa.Column("tool", sa.String(length=200), nullable=False),
        sa.Column("scope", sa.Text(), nullable=True),
        sa.Column("args", sa.JSON(), nullable=False),
        sa.Column("binding", sa.String(length=64), nullable=False),
        sa.Column("granted_by_platform", sa.String(length=32), nullable=False),
        sa.Column("granted_by_user", sa.String(length=200), nullable=False),
        sa.Column("granted_by_name", sa.String(length=400), nullable=False),
        sa.Column("granted_by", sa.JSON(), nullable=True),
        sa.Column("request_ref", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("max_uses", sa.Integer(), nullable=False),
        sa.Column("uses", sa.Integer(), server_default="0", nullable=False),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
        sa.Column("revoked_by", sa.String(length=400), nullable=True),
        sa.Column("expired_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_grants_agent_tool", "grants",
                    ["agent", "tool", "revoked_at", "expires_at"])
    op.create_index("ix_grants_active", "grants", ["revoked_at", "expired_at", "expires_at"])
    op.create_index("ix_grants_request_ref", "grants", ["request_ref"])


def downgrade() -> None:
    op.drop_index("ix_grants_request_ref", table_name="grants")
    op.drop_index("ix_grants_active", table_name="grants")
    op.drop_index("ix_grants_agent_tool", table_name="grants")
    op.drop_table("grants")
