"""note passages: the questions their section answers (a note's `asks`)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02 01:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('passages') as batch:
        batch.add_column(sa.Column('asks', sa.JSON(), nullable=False, server_default='[]'))


def downgrade() -> None:
    with op.batch_alter_table('passages') as batch:
        batch.drop_column('asks')
