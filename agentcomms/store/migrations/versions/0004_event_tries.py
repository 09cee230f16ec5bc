"""Events: the failed attempts before a message was typed or given up on, for `trace`.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0004"
down_revision: str | None = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("events") as batch:
        batch.add_column(
            sa.Column("tries", sa.JSON().with_variant(JSONB(), "postgresql"), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("events") as batch:
        batch.drop_column("tries")
