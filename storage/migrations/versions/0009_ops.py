"""Tamper-evident audit: a hash chain over audit rows, its head and retention gaps.

Revision ID: 0009_ops
Revises: 0007_api
Create Date: 2026-12-01
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from alembic import op

revision: str = "0009_ops"
down_revision: str | None = "0007_api"
branch_labels: str | None = None
depends_on: str | None = None

GENESIS = "0" * 64


def upgrade() -> None:
    with op.batch_alter_table("audit_log") as batch:
        batch.add_column(sa.Column("chain_seq", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("prev_hash", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("row_hash", sa.String(length=64), nullable=True))
        batch.create_unique_constraint("uq_audit_log_chain_seq", ["chain_seq"])
    head = op.create_table(
        "audit_chain_head",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("last_hash", sa.String(length=64), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "audit_chain_gaps",
        sa.Column("after_seq", sa.Integer(), nullable=False),
        sa.Column("from_hash", sa.String(length=64), nullable=False),
        sa.Column("to_hash", sa.String(length=64), nullable=False),
        sa.Column("rows", sa.Integer(), nullable=False),
        sa.Column("pruned_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("after_seq"),
    )
    # Existing rows are sealed by the bot's first sealing round (in id order).
    op.bulk_insert(head, [{"id": 1, "seq": 0, "last_hash": GENESIS,
                           "updated_at": dt.datetime.now(dt.UTC).replace(tzinfo=None)}])


def downgrade() -> None:
    op.drop_table("audit_chain_gaps")
    op.drop_table("audit_chain_head")
    with op.batch_alter_table("audit_log") as batch:
        batch.drop_constraint("uq_audit_log_chain_seq", type_="unique")
        batch.drop_column("row_hash")
        batch.drop_column("prev_hash")
        batch.drop_column("chain_seq")
