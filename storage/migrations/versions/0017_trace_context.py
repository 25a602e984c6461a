"""Trace context: the W3C ``traceparent`` / ``tracestate`` a request or run was created with.

Revision ID: 0017_trace_context
Revises: 0016_grants
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0017_trace_context"
down_revision: str | None = "0016_grants"
branch_labels: str | None = None
depends_on: str | None = None

TABLES = ("runs", "human_requests", "run_triggers")


def upgrade() -> None:
    for table in TABLES:
        op.add_column(table, sa.Column("trace_context", sa.JSON(), nullable=True))


def downgrade() -> None:
    for table in reversed(TABLES):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("trace_context")
