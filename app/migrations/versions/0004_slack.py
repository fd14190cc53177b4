"""slack posts, answer sessions, handled events, installations and OAuth states

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0004'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('slack_posts',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('team_id', sa.String(length=32), nullable=False),
    sa.Column('channel_id', sa.String(length=32), nullable=False),
    sa.Column('ts', sa.String(length=32), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('question_id', sa.String(length=32), nullable=True),
    sa.Column('learner_id', sa.String(length=40), nullable=True),
    sa.Column('session_id', sa.String(length=40), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['learner_id'], ['learners.id'], name=op.f('fk_slack_posts_learner_id_learners')),
    sa.ForeignKeyConstraint(['session_id'], ['quiz_sessions.id'], name=op.f('fk_slack_posts_session_id_quiz_sessions')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_slack_posts')),
    sa.UniqueConstraint('team_id', 'channel_id', 'ts', name='uq_slack_posts_message')
    )
    with op.batch_alter_table('slack_posts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_slack_posts_kind'), ['kind'], unique=False)
        batch_op.create_index(batch_op.f('ix_slack_posts_created_at'), ['created_at'], unique=False)

    op.create_table('slack_post_sessions',
    sa.Column('post_id', sa.Integer(), nullable=False),
    sa.Column('learner_id', sa.String(length=40), nullable=False),
    sa.Column('session_id', sa.String(length=40), nullable=False),
    sa.ForeignKeyConstraint(['post_id'], ['slack_posts.id'], name=op.f('fk_slack_post_sessions_post_id_slack_posts')),
    sa.ForeignKeyConstraint(['learner_id'], ['learners.id'], name=op.f('fk_slack_post_sessions_learner_id_learners')),
    sa.ForeignKeyConstraint(['session_id'], ['quiz_sessions.id'],
                            name=op.f('fk_slack_post_sessions_session_id_quiz_sessions')),
    sa.PrimaryKeyConstraint('post_id', 'learner_id', name=op.f('pk_slack_post_sessions')),
    sa.UniqueConstraint('session_id', name=op.f('uq_slack_post_sessions_session_id'))
    )

    op.create_table('slack_events',
    sa.Column('event_id', sa.String(length=128), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('event_id', name=op.f('pk_slack_events'))
    )

    op.create_table('slack_installations',
    sa.Column('key', sa.String(length=255), nullable=False),
    sa.Column('client_id', sa.String(length=64), nullable=False),
    sa.Column('enterprise_id', sa.String(length=32), nullable=True),
    sa.Column('team_id', sa.String(length=32), nullable=True),
    sa.Column('user_id', sa.String(length=32), nullable=True),
    sa.Column('data', sa.JSON(), nullable=False),
    sa.Column('installed_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('key', name=op.f('pk_slack_installations'))
    )
    with op.batch_alter_table('slack_installations', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_slack_installations_team_id'), ['team_id'], unique=False)

    op.create_table('slack_oauth_states',
    sa.Column('state', sa.String(length=64), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('state', name=op.f('pk_slack_oauth_states'))
    )


def downgrade() -> None:
    op.drop_table('slack_oauth_states')
    with op.batch_alter_table('slack_installations', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_slack_installations_team_id'))
    op.drop_table('slack_installations')
    op.drop_table('slack_events')
    op.drop_table('slack_post_sessions')
    with op.batch_alter_table('slack_posts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_slack_posts_created_at'))
        batch_op.drop_index(batch_op.f('ix_slack_posts_kind'))
    op.drop_table('slack_posts')
