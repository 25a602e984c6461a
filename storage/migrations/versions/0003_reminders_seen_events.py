"""Reminders, escalation and cross-replica event dedupe.

Revision ID: 0003_reminders_seen_events
Revises: 0002_outbox
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003_reminders_seen_events"
down_revision: str | None = "0002_outbox"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("human_requests") as batch:
        batch.add_column(sa.Column("next_reminder_at", sa.DateTime(), nullable=True))
        batch.add_column(
            sa.Column("reminders_sent", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("escalate_at", sa.DateTime(), nullable=True))
        batch.add_column(sa.Column("escalated_at", sa.DateTime(), nullable=True))
        batch.add_column(sa.Column("escalation_route", sa.String(length=200), nullable=True))
    op.create_index(
        "ix_human_requests_status_reminder", "human_requests", ["status", "next_reminder_at"]
    )
    op.create_index(
        "ix_human_requests_status_escalate", "human_requests", ["status", "escalate_at"]
    )
    op.create_table(
        "seen_events",
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("platform", sa.String(length=32), nullable=False),
        sa.Column("seen_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_index(op.f("ix_seen_events_seen_at"), "seen_events", ["seen_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_seen_events_seen_at"), table_name="seen_events")
    op.drop_table("seen_events")
    op.drop_index("ix_human_requests_status_escalate", table_name="human_requests")
    op.drop_index("ix_human_requests_status_reminder", table_name="human_requests")
    with op.batch_alter_table("human_requests") as batch:
        batch.drop_column("escalation_route")
        batch.drop_column("escalated_at")
        batch.drop_column("escalate_at")
        batch.drop_column("reminders_sent")
        batch.drop_column("next_reminder_at")
