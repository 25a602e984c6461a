"""Rate limits: one token bucket row per API client, shared by every replica.

Revision ID: 0015_rate_limits
Revises: 0014_instances
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0015_rate_limits"
down_revision: str | None = "0014_instances"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "rate_limits",
        sa.Column("client_id", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(["client_id"], ["api_clients.id"]),
        sa.PrimaryKeyConstraint("client_id"),
    )


def downgrade() -> None:
    op.drop_table("rate_limits")
