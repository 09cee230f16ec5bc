"""Calls coming in: what each call's latest prompt waits for, so a call that ends while a message
is being recorded keeps its progress until the recording comes.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision: str | None = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("phone_callers") as batch:
        batch.add_column(sa.Column("awaits", sa.String(16), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("phone_callers") as batch:
        batch.drop_column("awaits")
