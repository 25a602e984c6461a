"""API clients, external requests (HTTP API / MCP) and run triggers (events, schedules).

Revision ID: 0007_api
Revises: 0003_reminders_seen_events
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0007_api"
down_revision: str | None = "0006_tool_approvals"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "api_clients",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("key_prefix", sa.String(length=32), nullable=False),
        sa.Column("secret_enc", sa.Text(), nullable=False),
        sa.Column("previous_secret_enc", sa.Text(), nullable=True),
        sa.Column("secret_rotated_at", sa.DateTime(), nullable=True),
        sa.Column("routes", sa.JSON(), nullable=False),
        sa.Column("agents", sa.JSON(), nullable=False),
        sa.Column("rate_limit", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key_hash"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "external_requests",
        sa.Column("request_id", sa.Integer(), nullable=False),
        sa.Column("client_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("idempotency_key", sa.String(length=200), nullable=True),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("callback_url", sa.Text(), nullable=True),
        sa.Column("context", sa.JSON(), nullable=True),
        sa.Column("tool_name", sa.String(length=200), nullable=True),
        sa.Column("tool_input", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["client_id"], ["api_clients.id"]),
        sa.ForeignKeyConstraint(["request_id"], ["human_requests.id"]),
        sa.PrimaryKeyConstraint("request_id"),
        sa.UniqueConstraint("client_id", "idempotency_key"),
    )
    op.create_index("ix_external_requests_client", "external_requests",
                    ["client_id", "request_id"], unique=False)
    op.create_table(
        "run_triggers",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("schedule", sa.String(length=200), nullable=True),
        sa.Column("fire_at", sa.DateTime(), nullable=True),
        sa.Column("client_id", sa.Integer(), nullable=True),
        sa.Column("agent", sa.String(length=200), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("origin_platform", sa.String(length=32), nullable=False),
        sa.Column("origin_channel", sa.String(length=200), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("lease_until", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["client_id"], ["api_clients.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("schedule", "fire_at"),
    )
    op.create_index(op.f("ix_run_triggers_client_id"), "run_triggers", ["client_id"],
                    unique=False)
    op.create_index("ix_run_triggers_state_lease", "run_triggers", ["state", "lease_until"],
                    unique=False)


def downgrade() -> None:
    op.drop_index("ix_run_triggers_state_lease", table_name="run_triggers")
    op.drop_index(op.f("ix_run_triggers_client_id"), table_name="run_triggers")
    op.drop_table("run_triggers")
    op.drop_index("ix_external_requests_client", table_name="external_requests")
    op.drop_table("external_requests")
    op.drop_table("api_clients")
