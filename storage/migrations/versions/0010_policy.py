"""Frozen approval policy per request; who a response counts as (people, sign-off groups).

Revision ID: 0010_policy
Revises: 0009_ops
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0010_policy"
down_revision: str | None = "0009_ops"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("human_requests") as batch:
        batch.add_column(sa.Column("policy", sa.JSON(), nullable=True))
    with op.batch_alter_table("responses") as batch:
        batch.add_column(sa.Column("person", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("signoff", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("responses") as batch:
        batch.drop_column("signoff")
        batch.drop_column("person")
    with op.batch_alter_table("human_requests") as batch:
        batch.drop_column("policy")
