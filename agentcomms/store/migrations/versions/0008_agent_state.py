"""Agents: what the agent is doing, from its hooks (ready, busy, waiting for what, since when).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision: str | None = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.add_column(
            sa.Column("state", sa.String(16), nullable=False, server_default="unknown")
        )
        batch.add_column(sa.Column("waiting_for", sa.Text(), nullable=True))
        batch.add_column(sa.Column("state_since", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.drop_column("state_since")
        batch.drop_column("waiting_for")
        batch.drop_column("state")
