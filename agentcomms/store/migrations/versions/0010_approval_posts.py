"""Approval posts: which chat message shows which approval, so a restarted gateway still edits
it (its buttons gone) once the approval is decided.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision: str | None = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "approval_posts",
        sa.Column("approval_id", sa.String(16), primary_key=True),
        sa.Column("provider", sa.String(32), primary_key=True),
        sa.Column("chat_id", sa.String(255), primary_key=True),
        sa.Column("message_id", sa.String(255), nullable=False),
        sa.Column("posted_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_approval_posts_posted_at", "approval_posts", ["posted_at"])


def downgrade() -> None:
    op.drop_index("ix_approval_posts_posted_at", table_name="approval_posts")
    op.drop_table("approval_posts")
