"""Instances and lease holders: a dead process's rows are taken over within seconds.

Revision ID: 0014_instances
Revises: 0013_run_starts
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0014_instances"
down_revision: str | None = "0013_run_starts"
branch_labels: str | None = None
depends_on: str | None = None

HELD = ("resume_jobs", "outbox", "click_inbox", "run_starts")


def upgrade() -> None:
    op.create_table(
        "instances",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(), nullable=False),
        sa.Column("stopped_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_instances_heartbeat_at", "instances", ["heartbeat_at"])
    for table in HELD:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("holder", sa.String(length=64), nullable=True))


def downgrade() -> None:
    for table in HELD:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("holder")
    op.drop_index("ix_instances_heartbeat_at", table_name="instances")
    op.drop_table("instances")
