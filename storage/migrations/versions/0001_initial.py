"""Initial schema: runs, requests, deliveries, responses, staged files, resume jobs, audit.

Revision ID: 0001_initial
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table('audit_log',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('event', sa.String(length=64), nullable=False),
    sa.Column('outcome', sa.String(length=32), nullable=False),
    sa.Column('run_id', sa.String(length=64), nullable=True),
    sa.Column('request_ref', sa.String(length=64), nullable=True),
    sa.Column('actor_platform', sa.String(length=32), nullable=True),
    sa.Column('actor_user', sa.String(length=200), nullable=True),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('details', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_audit_log_event'), 'audit_log', ['event'], unique=False)
    op.create_index(op.f('ix_audit_log_request_ref'), 'audit_log', ['request_ref'], unique=False)
    op.create_index(op.f('ix_audit_log_run_id'), 'audit_log', ['run_id'], unique=False)
    op.create_table('runs',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('agent', sa.String(length=200), nullable=False),
    sa.Column('started_by_platform', sa.String(length=32), nullable=False),
    sa.Column('started_by_user', sa.String(length=200), nullable=False),
    sa.Column('started_by_name', sa.String(length=200), nullable=True),
    sa.Column('origin_platform', sa.String(length=32), nullable=False),
    sa.Column('origin_channel', sa.String(length=200), nullable=True),
    sa.Column('origin_thread', sa.String(length=200), nullable=True),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('prompt', sa.Text(), nullable=False),
    sa.Column('snapshot', sa.JSON(), nullable=True),
    sa.Column('output', sa.JSON(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_runs_status'), 'runs', ['status'], unique=False)
    op.create_table('human_requests',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('ref', sa.String(length=64), nullable=False),
    sa.Column('run_id', sa.String(length=64), nullable=False),
    sa.Column('tool_call_id', sa.String(length=200), nullable=False),
    sa.Column('args', sa.JSON(), nullable=False),
    sa.Column('route', sa.String(length=200), nullable=False),
    sa.Column('quorum', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('deadline', sa.DateTime(), nullable=True),
    sa.Column('decided_by_platform', sa.String(length=32), nullable=True),
    sa.Column('decided_by_user', sa.String(length=200), nullable=True),
    sa.Column('decided_by_name', sa.String(length=200), nullable=True),
    sa.Column('decided_at', sa.DateTime(), nullable=True),
    sa.Column('action_id', sa.String(length=200), nullable=True),
    sa.Column('result', sa.JSON(), nullable=True),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('ref')
    )
    op.create_index(op.f('ix_human_requests_run_id'), 'human_requests', ['run_id'], unique=False)
    op.create_index('ix_human_requests_status_deadline', 'human_requests', ['status', 'deadline'], unique=False)
    op.create_table('deliveries',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('request_id', sa.Integer(), nullable=False),
    sa.Column('platform', sa.String(length=32), nullable=False),
    sa.Column('target_kind', sa.String(length=32), nullable=False),
    sa.Column('target_id', sa.String(length=200), nullable=False),
    sa.Column('channel', sa.String(length=200), nullable=False),
    sa.Column('message_id', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['request_id'], ['human_requests.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_deliveries_platform_message', 'deliveries', ['platform', 'message_id'], unique=False)
    op.create_index(op.f('ix_deliveries_request_id'), 'deliveries', ['request_id'], unique=False)
    op.create_table('responses',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('request_id', sa.Integer(), nullable=False),
    sa.Column('platform', sa.String(length=32), nullable=False),
    sa.Column('user_id', sa.String(length=200), nullable=False),
    sa.Column('display_name', sa.String(length=200), nullable=True),
    sa.Column('action_id', sa.String(length=200), nullable=False),
    sa.Column('values', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['request_id'], ['human_requests.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('request_id', 'platform', 'user_id')
    )
    op.create_index(op.f('ix_responses_request_id'), 'responses', ['request_id'], unique=False)
    op.create_table('resume_jobs',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('request_id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.String(length=64), nullable=False),
    sa.Column('state', sa.String(length=32), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(), nullable=False),
    sa.Column('lease_until', sa.DateTime(), nullable=True),
    sa.Column('claim_token', sa.String(length=64), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['request_id'], ['human_requests.id'], ),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('request_id')
    )
    op.create_index(op.f('ix_resume_jobs_run_id'), 'resume_jobs', ['run_id'], unique=False)
    op.create_index('ix_resume_jobs_state_next', 'resume_jobs', ['state', 'next_attempt_at'], unique=False)
    op.create_table('staged_files',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('request_id', sa.Integer(), nullable=False),
    sa.Column('platform', sa.String(length=32), nullable=False),
    sa.Column('user_id', sa.String(length=200), nullable=False),
    sa.Column('field_name', sa.String(length=200), nullable=False),
    sa.Column('files', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['request_id'], ['human_requests.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_staged_files_request_id'), 'staged_files', ['request_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_staged_files_request_id'), table_name='staged_files')
    op.drop_table('staged_files')
    op.drop_index('ix_resume_jobs_state_next', table_name='resume_jobs')
    op.drop_index(op.f('ix_resume_jobs_run_id'), table_name='resume_jobs')
    op.drop_table('resume_jobs')
    op.drop_index(op.f('ix_responses_request_id'), table_name='responses')
    op.drop_table('responses')
    op.drop_index(op.f('ix_deliveries_request_id'), table_name='deliveries')
    op.drop_index('ix_deliveries_platform_message', table_name='deliveries')
    op.drop_table('deliveries')
    op.drop_index('ix_human_requests_status_deadline', table_name='human_requests')
    op.drop_index(op.f('ix_human_requests_run_id'), table_name='human_requests')
    op.drop_table('human_requests')
    op.drop_index(op.f('ix_runs_status'), table_name='runs')
    op.drop_table('runs')
    op.drop_index(op.f('ix_audit_log_run_id'), table_name='audit_log')
    op.drop_index(op.f('ix_audit_log_request_ref'), table_name='audit_log')
    op.drop_index(op.f('ix_audit_log_event'), table_name='audit_log')
    op.drop_table('audit_log')
