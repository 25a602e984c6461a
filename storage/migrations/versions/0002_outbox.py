"""Outbox: platform side effects recorded in the same transaction as the state change.

Revision ID: 0002_outbox
Revises: 0001_initial
Create Date: 2025-03-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0002_outbox"
down_revision: str | None = "0001_initial"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "outbox",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("request_id", sa.Integer(), nullable=True),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("platform", sa.String(length=32), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(), nullable=False),
        sa.Column("lease_until", sa.DateTime(), nullable=True),
        sa.Column("claim_token", sa.String(length=64), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["request_id"], ["human_requests.id"]),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_outbox_request_id"), "outbox", ["request_id"], unique=False)
    op.create_index(op.f("ix_outbox_run_id"), "outbox", ["run_id"], unique=False)
    op.create_index("ix_outbox_state_next", "outbox", ["state", "next_attempt_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_outbox_state_next", table_name="outbox")
    op.drop_index(op.f("ix_outbox_run_id"), table_name="outbox")
    op.drop_index(op.f("ix_outbox_request_id"), table_name="outbox")
    op.drop_table("outbox")
