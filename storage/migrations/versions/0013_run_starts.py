"""Run starts: a start stored before the platform is told "started", run from the row.

Revision ID: 0013_run_starts
Revises: 0012_home
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0013_run_starts"
down_revision: str | None = "0012_home"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "run_starts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("agent", sa.String(length=200), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("started_by_platform", sa.String(length=32), nullable=False),
        sa.Column("started_by_user", sa.String(length=200), nullable=False),
        sa.Column("started_by_name", sa.String(length=200), nullable=True),
        sa.Column("started_by_team", sa.String(length=64), nullable=True),
        sa.Column("started_by_enterprise", sa.String(length=64), nullable=True),
        sa.Column("origin_platform", sa.String(length=32), nullable=False),
        sa.Column("origin_channel", sa.String(length=200), nullable=True),
        sa.Column("origin_thread", sa.String(length=200), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(), nullable=False),
        sa.Column("lease_until", sa.DateTime(), nullable=True),
        sa.Column("claim_token", sa.String(length=64), nullable=True),
        sa.Column("outcome", sa.String(length=32), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id"),
    )
    op.create_index("ix_run_starts_state_next", "run_starts", ["state", "next_attempt_at"],
                    unique=False)


def downgrade() -> None:
    op.drop_index("ix_run_starts_state_next", table_name="run_starts")
    op.drop_table("run_starts")
