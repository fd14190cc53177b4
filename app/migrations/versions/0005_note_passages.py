"""study-note passages and the questions they explain

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0005'
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('passages',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('note', sa.String(length=255), nullable=False),
    sa.Column('source_path', sa.String(length=1024), nullable=False),
    sa.Column('title', sa.Text(), nullable=False),
    sa.Column('topics', sa.JSON(), nullable=False),
    sa.Column('heading_path', sa.JSON(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('line_start', sa.Integer(), nullable=False),
    sa.Column('line_end', sa.Integer(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('citations', sa.JSON(), nullable=False),
    sa.Column('explains', sa.JSON(), nullable=False),
    sa.Column('content_hash', sa.String(length=64), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('retired_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_passages'))
    )
    with op.batch_alter_table('passages', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_passages_note'), ['note'], unique=False)
        batch_op.create_index(batch_op.f('ix_passages_status'), ['status'], unique=False)

    op.create_table('question_passages',
    sa.Column('question_id', sa.String(length=32), nullable=False),
    sa.Column('passage_id', sa.String(length=32), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['passage_id'], ['passages.id'], name=op.f('fk_question_passages_passage_id_passages')),
    sa.PrimaryKeyConstraint('question_id', 'passage_id', name=op.f('pk_question_passages'))
    )
    with op.batch_alter_table('question_passages', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_question_passages_passage_id'), ['passage_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('question_passages', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_question_passages_passage_id'))
    op.drop_table('question_passages')
    with op.batch_alter_table('passages', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_passages_status'))
        batch_op.drop_index(batch_op.f('ix_passages_note'))
    op.drop_table('passages')
