"""Retention: redaction marks, and refused attempts aggregated per person and request.

Revision ID: 0005_retention
Revises: 0003_reminders_seen_events
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0005_retention"
down_revision: str | None = "0004_click_inbox"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("audit_log") as batch:
        batch.add_column(
            sa.Column("occurrences", sa.Integer(), nullable=False, server_default="1")
        )
        batch.add_column(sa.Column("last_seen_at", sa.DateTime(), nullable=True))
        batch.add_column(sa.Column("aggregate_key", sa.String(length=255), nullable=True))
        batch.create_unique_constraint("uq_audit_log_aggregate_key", ["aggregate_key"])
    op.create_index(op.f("ix_audit_log_created_at"), "audit_log", ["created_at"])
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("redacted_at", sa.DateTime(), nullable=True))
    op.create_index("ix_runs_redacted_updated", "runs", ["redacted_at", "updated_at"])
    with op.batch_alter_table("human_requests") as batch:
        batch.add_column(sa.Column("redacted_at", sa.DateTime(), nullable=True))
    op.create_index(
        "ix_human_requests_redacted_decided", "human_requests", ["redacted_at", "decided_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_human_requests_redacted_decided", table_name="human_requests")
    with op.batch_alter_table("human_requests") as batch:
        batch.drop_column("redacted_at")
    op.drop_index("ix_runs_redacted_updated", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("redacted_at")
    op.drop_index(op.f("ix_audit_log_created_at"), table_name="audit_log")
    with op.batch_alter_table("audit_log") as batch:
        batch.drop_constraint("uq_audit_log_aggregate_key", type_="unique")
        batch.drop_column("aggregate_key")
        batch.drop_column("last_seen_at")
        batch.drop_column("occurrences")
