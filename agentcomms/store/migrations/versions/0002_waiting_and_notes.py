"""Events: a note on what typing changed, and an index that counts what waits per agent.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("events") as batch:
        batch.add_column(sa.Column("note", sa.Text(), nullable=True))
    # A send checks the agent's limits by counting its waiting ("new") messages.
    op.create_index("ix_events_agent_status", "events", ["agent_id", "status"])


def downgrade() -> None:
    op.drop_index("ix_events_agent_status", table_name="events")
    with op.batch_alter_table("events") as batch:
        batch.drop_column("note")
