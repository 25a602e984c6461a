"""App Home: the runs a person started are read by (platform, user, newest first).

Revision ID: 0012_home
Revises: 0009_ops
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision: str = "0012_home"
down_revision: str | None = "0011_waiting"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_index("ix_runs_started_by", "runs",
                    ["started_by_platform", "started_by_user", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_runs_started_by", table_name="runs")
