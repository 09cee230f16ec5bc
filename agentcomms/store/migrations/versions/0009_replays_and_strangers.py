"""Replays and strangers: the newest registration's time on the agent row, the signed inputs
already used (calls, outbox items), and the hour's counts of what strangers cost.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision: str | None = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.add_column(sa.Column("pane_changed_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "spent",
        sa.Column("kind", sa.String(32), primary_key=True),
        sa.Column("id", sa.String(255), primary_key=True),
        sa.Column("by", sa.String(255), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "stranger_counts",
        sa.Column("hour", sa.Integer(), primary_key=True),
        sa.Column("key", sa.String(320), primary_key=True),
        sa.Column("count", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("stranger_counts")
    op.drop_table("spent")
    with op.batch_alter_table("agents") as batch:
        batch.drop_column("pane_changed_at")
