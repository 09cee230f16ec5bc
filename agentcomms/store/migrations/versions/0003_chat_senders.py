"""Chat senders admitted to reach agents, and the pairing codes that admit them.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels = None
depends_on = None


def timestamp(name: str, *, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "chat_senders",
        sa.Column("provider", sa.String(32), primary_key=True),
        sa.Column("sender_id", sa.String(255), primary_key=True),
        sa.Column("sender_name", sa.Text(), nullable=True),
        sa.Column("chat_id", sa.String(255), nullable=True),
        timestamp("admitted_at"),
        timestamp("revoked_at", nullable=True),
    )
    op.create_table(
        "pairing_codes",
        sa.Column("code", sa.String(16), primary_key=True),
        sa.Column("provider", sa.String(32), nullable=False),
        sa.Column("sender_id", sa.String(255), nullable=False),
        sa.Column("sender_name", sa.Text(), nullable=True),
        sa.Column("chat_id", sa.String(255), nullable=True),
        timestamp("created_at"),
        timestamp("expires_at"),
        sa.UniqueConstraint("provider", "sender_id", name="uq_pairing_codes_sender"),
    )


def downgrade() -> None:
    op.drop_table("pairing_codes")
    op.drop_table("chat_senders")
