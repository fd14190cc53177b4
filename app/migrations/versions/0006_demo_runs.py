"""demo workers, jobs, events, results and runs

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-06 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0006'
down_revision: str | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('demo_jobs',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('demo', sa.String(length=32), nullable=False),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('params_hash', sa.String(length=64), nullable=False),
    sa.Column('kind', sa.String(length=80), nullable=False),
    sa.Column('queue', sa.String(length=120), nullable=False),
    sa.Column('world_size', sa.Integer(), nullable=False),
    sa.Column('cost', sa.BigInteger(), nullable=False),
    sa.Column('dedupe_key', sa.String(length=64), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('attempts', sa.JSON(), nullable=False),
    sa.Column('seq_base', sa.Integer(), nullable=False),
    sa.Column('worker_id', sa.String(length=80), nullable=True),
    sa.Column('hardware', sa.JSON(), nullable=True),
    sa.Column('pgid', sa.Integer(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('result_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('claimed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('watched_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_demo_jobs')),
    sa.UniqueConstraint('dedupe_key', name=op.f('uq_demo_jobs_dedupe_key'))
    )
    with op.batch_alter_table('demo_jobs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_demo_jobs_demo'), ['demo'], unique=False)
        batch_op.create_index(batch_op.f('ix_demo_jobs_queue'), ['queue'], unique=False)
        batch_op.create_index(batch_op.f('ix_demo_jobs_status'), ['status'], unique=False)
        batch_op.create_index(batch_op.f('ix_demo_jobs_worker_id'), ['worker_id'], unique=False)

    op.create_table('demo_results',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('job_id', sa.String(length=40), nullable=False),
    sa.Column('demo', sa.String(length=32), nullable=False),
    sa.Column('params_hash', sa.String(length=64), nullable=False),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('kind', sa.String(length=80), nullable=False),
    sa.Column('hardware', sa.JSON(), nullable=False),
    sa.Column('worker_id', sa.String(length=80), nullable=True),
    sa.Column('measured_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('result', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_demo_results')),
    sa.UniqueConstraint('job_id', name=op.f('uq_demo_results_job_id'))
    )
    with op.batch_alter_table('demo_results', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_demo_results_demo'), ['demo'], unique=False)
        batch_op.create_index(batch_op.f('ix_demo_results_measured_at'), ['measured_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_demo_results_params_hash'), ['params_hash'], unique=False)

    op.create_table('demo_workers',
    sa.Column('id', sa.String(length=80), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('hardware', sa.JSON(), nullable=False),
    sa.Column('queues', sa.JSON(), nullable=False),
    sa.Column('held', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_seen', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_demo_workers'))
    )
    with op.batch_alter_table('demo_workers', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_demo_workers_last_seen'), ['last_seen'], unique=False)
        batch_op.create_index(batch_op.f('ix_demo_workers_status'), ['status'], unique=False)

    op.create_table('demo_job_events',
    sa.Column('job_id', sa.String(length=40), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('type', sa.String(length=16), nullable=False),
    sa.Column('data', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['demo_jobs.id'], name=op.f('fk_demo_job_events_job_id_demo_jobs')),
    sa.PrimaryKeyConstraint('job_id', 'seq', name=op.f('pk_demo_job_events'))
    )
    op.create_table('demo_runs',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('job_id', sa.String(length=40), nullable=False),
    sa.Column('requester_kind', sa.String(length=8), nullable=False),
    sa.Column('requester_id', sa.String(length=40), nullable=False),
    sa.Column('answer', sa.String(length=8), nullable=False),
    sa.Column('cancelled_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['demo_jobs.id'], name=op.f('fk_demo_runs_job_id_demo_jobs')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_demo_runs'))
    )
    with op.batch_alter_table('demo_runs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_demo_runs_job_id'), ['job_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_demo_runs_requester_id'), ['requester_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('demo_runs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_demo_runs_requester_id'))
        batch_op.drop_index(batch_op.f('ix_demo_runs_job_id'))

    op.drop_table('demo_runs')
    op.drop_table('demo_job_events')
    with op.batch_alter_table('demo_workers', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_demo_workers_status'))
        batch_op.drop_index(batch_op.f('ix_demo_workers_last_seen'))

    op.drop_table('demo_workers')
    with op.batch_alter_table('demo_results', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_demo_results_params_hash'))
        batch_op.drop_index(batch_op.f('ix_demo_results_measured_at'))
        batch_op.drop_index(batch_op.f('ix_demo_results_demo'))

    op.drop_table('demo_results')
    with op.batch_alter_table('demo_jobs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_demo_jobs_worker_id'))
        batch_op.drop_index(batch_op.f('ix_demo_jobs_status'))
        batch_op.drop_index(batch_op.f('ix_demo_jobs_queue'))
        batch_op.drop_index(batch_op.f('ix_demo_jobs_demo'))

    op.drop_table('demo_jobs')
