"""Initial projection: events, agents, channels, calls.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision: str | None = None
branch_labels = None
depends_on = None

# Types spelt out rather than imported from schema.py: a revision must not change when the code does.
seq_type = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
json_type = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def timestamp(name: str, *, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("seq", seq_type, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("agent_id", sa.String(255), nullable=False),
        sa.Column("channel_id", sa.String(255), nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("direction", sa.String(8), nullable=False),
        sa.Column("source_agent_id", sa.String(255), nullable=True),
        sa.Column("payload", json_type, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        timestamp("created_at"),
        timestamp("delivered_at", nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.UniqueConstraint("id", name="uq_events_id"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_events_agent_seq", "events", ["agent_id", "seq"])
    op.create_index("ix_events_channel_seq", "events", ["channel_id", "seq"])
    op.create_index("ix_events_agent_direction_seq", "events", ["agent_id", "direction", "seq"])

    op.create_table(
        "agents",
        sa.Column("id", sa.String(255), primary_key=True),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("target", sa.String(255), nullable=True),
        sa.Column("tmux_socket", sa.Text(), nullable=True),
        sa.Column("host", sa.String(255), nullable=True),
        sa.Column("interrupt_key", sa.String(32), nullable=False),
        sa.Column("submit_delay_ms", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("pending", sa.Integer(), nullable=False),
        sa.Column("last_delivered_event_id", sa.String(64), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        timestamp("updated_at"),
        sa.Column("read_cursor", seq_type, nullable=True),
        timestamp("registered_at"),
    )

    op.create_table(
        "channels",
        sa.Column("channel_id", sa.String(255), primary_key=True),
        sa.Column("agent_id", sa.String(255), nullable=True),
        sa.Column("provider", sa.String(32), nullable=False),
        timestamp("created_at"),
    )
    op.create_index("ix_channels_agent_id", "channels", ["agent_id"])

    op.create_table(
        "calls",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("agent_id", sa.String(255), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("direction", sa.String(8), nullable=False),
        sa.Column("phone_number", sa.String(64), nullable=True),
        timestamp("started_at"),
        timestamp("ended_at", nullable=True),
        sa.Column("duration_seconds", sa.Float(), nullable=True),
        sa.Column("transcript_ref", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
    )
    op.create_index("ix_calls_agent_id", "calls", ["agent_id"])


def downgrade() -> None:
    op.drop_table("calls")
    op.drop_table("channels")
    op.drop_table("agents")
    op.drop_table("events")
