"""Waiting: escalation chains, last reminder time, and delegations (out of office).

Revision ID: 0011_waiting
Revises: 0009_ops
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0011_waiting"
down_revision: str | None = "0010_policy"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("human_requests") as batch:
        batch.add_column(sa.Column("escalation_step", sa.Integer(), nullable=False,
                                   server_default="0"))
        batch.add_column(sa.Column("escalated_routes", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("reminded_at", sa.DateTime(), nullable=True))
        batch.add_column(sa.Column("decided_via", sa.String(length=200), nullable=True))
    op.create_table(
        "delegations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("platform", sa.String(length=32), nullable=False),
        sa.Column("from_user", sa.String(length=200), nullable=False),
        sa.Column("from_name", sa.String(length=200), nullable=True),
        sa.Column("to_user", sa.String(length=200), nullable=False),
        sa.Column("to_name", sa.String(length=200), nullable=True),
        sa.Column("until", sa.DateTime(), nullable=False),
        sa.Column("created_by", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
        sa.Column("revoked_by", sa.String(length=200), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_delegations_to", "delegations", ["platform", "to_user"])
    op.create_index("ix_delegations_from", "delegations", ["platform", "from_user"])


def downgrade() -> None:
    op.drop_index("ix_delegations_from", table_name="delegations")
    op.drop_index("ix_delegations_to", table_name="delegations")
    op.drop_table("delegations")
    with op.batch_alter_table("human_requests") as batch:
        batch.drop_column("decided_via")
        batch.drop_column("reminded_at")
        batch.drop_column("escalated_routes")
        batch.drop_column("escalation_step")
