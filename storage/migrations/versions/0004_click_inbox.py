"""Click inbox: clicks recorded before they are acknowledged, decided from the row.

Revision ID: 0004_click_inbox
Revises: 0003_reminders_seen_events
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0004_click_inbox"
down_revision: str | None = "0003_reminders_seen_events"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "click_inbox",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("platform", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("ref", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("display_name", sa.String(length=200), nullable=True),
        sa.Column("team", sa.String(length=64), nullable=True),
        sa.Column("enterprise", sa.String(length=64), nullable=True),
        sa.Column("action_id", sa.String(length=200), nullable=False),
        sa.Column("values", sa.JSON(), nullable=False),
        sa.Column("reply_to", sa.JSON(), nullable=False),
        sa.Column("received_at", sa.DateTime(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(), nullable=False),
        sa.Column("lease_until", sa.DateTime(), nullable=True),
        sa.Column("claim_token", sa.String(length=64), nullable=True),
        sa.Column("outcome", sa.String(length=32), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_click_inbox_ref"), "click_inbox", ["ref"], unique=False)
    op.create_index(
        "ix_click_inbox_state_next", "click_inbox", ["state", "next_attempt_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_click_inbox_state_next", table_name="click_inbox")
    op.drop_index(op.f("ix_click_inbox_ref"), table_name="click_inbox")
    op.drop_table("click_inbox")
