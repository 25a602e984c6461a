"""Tool approvals: request kind, the tool call shown on the card, binding hash, batch.

Revision ID: 0006_tool_approvals
Revises: 0003_reminders_seen_events
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0006_tool_approvals"
down_revision: str | None = "0005_retention"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("human_requests") as batch:
        batch.add_column(
            sa.Column("kind", sa.String(length=32), nullable=False, server_default="ask_human")
        )
        batch.add_column(sa.Column("tool", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("binding", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("batch", sa.String(length=64), nullable=True))
    op.create_index("ix_human_requests_run_batch", "human_requests", ["run_id", "batch"])


def downgrade() -> None:
    op.drop_index("ix_human_requests_run_batch", table_name="human_requests")
    with op.batch_alter_table("human_requests") as batch:
        batch.drop_column("batch")
        batch.drop_column("binding")
        batch.drop_column("tool")
        batch.drop_column("kind")
