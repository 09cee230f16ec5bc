"""Calls coming in: a message whose recording Twilio had not made available yet when the caller
finished it, kept until its recording status callback says it is ready (then posted once).

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision: str | None = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "phone_recordings",
        sa.Column("recording", sa.String(64), primary_key=True),
        sa.Column("call", sa.String(64), nullable=False),
        sa.Column("number", sa.String(64), nullable=False),
        sa.Column("agent", sa.String(255), nullable=False),
        sa.Column("url", sa.String(1000), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("phone_recordings")
