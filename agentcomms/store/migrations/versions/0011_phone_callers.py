"""Calls coming in: each call's caller, PIN and requests still to offer, between its steps.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0011"
down_revision: str | None = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "phone_callers",
        sa.Column("call", sa.String(64), primary_key=True),
        sa.Column("number", sa.String(64), nullable=False),
        sa.Column("admitted", sa.Integer(), nullable=False),
        sa.Column("pending", sa.JSON().with_variant(JSONB(), "postgresql"), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("phone_callers")
