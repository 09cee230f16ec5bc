"""Every message is signed: the list of those that waited, untagged, through the upgrade to
signing goes. No deployment ever ran unsigned, so the pane's host no longer types any untagged
message, and nothing reads the list.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_table("events_before_signing")


def downgrade() -> None:
    op.create_table(
        "events_before_signing",
        sa.Column("id", sa.String(64), primary_key=True),
    )
